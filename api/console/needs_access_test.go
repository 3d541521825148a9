package console_test

import (
	"regexp"
	"strings"
	"testing"
)

var needRowRE = regexp.MustCompile(`(?s)<li class="need need-([a-z-]+)".*?</li>`)

// A person limited to namespaces sees, in "needs a person", only what
// they may decide: signed in with a token limited to bookings (and
// hubspot), the overview of the on-call site shows bookings' stuck key,
// and nothing of crm's 30 stuck keys of the HubSpot outage, nor its lost
// parked key: no namespace, no count, no "Decide these N keys" link. The
// same page for an unlimited token shows them (the test could not pass on
// a page that shows nothing). Mutation: the namespace check of the
// grouping of unknown keys (needs.go, sess.who.MayUse) removed: the
// limited person sees crm's 30 keys.
func TestOverviewNeedsShowsOnlyThePersonsNamespaces(t *testing.T) {
	s := newOnCallSite(t)
	s.unknownKey("bookings", "bk-stuck", "n8n exec 9", "timeout")
	rows := func(token string) map[string]string {
		t.Helper()
		c, _ := signedIn(t, s, token)
		_, page := fetch(t, c, s.url+"/ui")
		out := map[string]string{}
		for _, m := range needRowRE.FindAllStringSubmatch(page, -1) {
			out[m[1]] += m[0]
		}
		return out
	}
	all := rows(actToken)
	if !strings.Contains(all["unknown"], "crm") || !strings.Contains(all["unknown"], "Decide these 30 keys") {
		t.Fatalf("the unlimited overview does not show crm's outage: %q", all["unknown"])
	}
	mine := rows(limitedToken)
	if !strings.Contains(mine["unknown"], "bookings") {
		t.Fatalf("the limited person does not see bookings' stuck key: %q", mine["unknown"])
	}
	for kind, row := range mine {
		for _, leak := range []string{"crm", "lead-", "Decide these 30 keys", ">30<"} {
			if strings.Contains(row, leak) {
				t.Errorf("a person limited to bookings sees %q in the %s row: %s", leak, kind, row)
			}
		}
	}
}
