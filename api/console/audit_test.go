package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// An approval is a person's decision: the audit list reads it from the
// event log (DecisionKinds) and names who approved or rejected which key.
// Mutation tried: EventApprovalDecided left out of DecisionKinds.
func TestAuditListsApprovals(t *testing.T) {
	if !slices.Contains(keystore.DecisionKinds, keystore.EventApprovalDecided) {
		t.Fatal("the audit list does not ask the event log for approvals")
	}
	ev := keystore.Event{At: time.Now(), Kind: keystore.EventApprovalDecided, Namespace: "invoices", Key: "inv-3",
		Owner: "bob@example.com (console, OIDC)", Message: "rejected"}
	it, ok := console.AuditOf(ev)
	if !ok || it.Who != "bob@example.com (console, OIDC)" || it.What != "rejected the event (approval)" || it.Namespace != "invoices" || it.Key != "inv-3" {
		t.Fatalf("audit item %+v (%v), want bob rejected invoices/inv-3", it, ok)
	}
}

// A bulk decision is one row of the audit list: the person, the decision
// in words with its count, the reason and a link to its keys, over real
// HTTP; single decisions made around it stay one row each, and the link
// lists the 30 keys the bulk decided.
// Mutation tried: the bbolt codec writing events without their bulk: the
// audit shows 30 rows "resolved the key: failed" and no bulk row.
func TestAuditShowsABulkDecisionAsOneEntry(t *testing.T) {
	s := newSite(t)
	s.unknownKeys("bookings", "bk", "n8n Bookings", 30)
	s.unknownKey("bookings", "one-1", "n8n Bookings exec 91", "")
	s.unknownKey("bookings", "one-2", "n8n Bookings exec 92", "")
	s.unknownKey("crm", "won-1", "n8n Crm exec 1", "")
	s.unknownKey("crm", "won-2", "n8n Crm exec 2", "")
	single := func(key string) {
		t.Helper()
		if _, err := s.store.Resolve(s.ctx, keystore.ResolveRequest{Namespace: "bookings", Key: key, Resolution: keystore.StateFailed,
			By: "ops-cli", Note: "checked by hand"}); err != nil {
			t.Fatal(err)
		}
	}
	single("one-1")
	c, csrf := signedIn(t, s, actToken)
	filter := url.Values{"namespace": {"bookings"}, "key_prefix": {"bk-"}}.Encode()
	_, page, _ := post(t, c, s.url+"/ui/bulk", url.Values{"csrf": {csrf}, "filter": {filter}, "action": {"retry"}, "note": {"CRM incident 4711: retry after the fix"}})
	confirm := confirmForm(t, page)
	if status, _, loc := post(t, c, s.url+"/ui/bulk", confirm); status != http.StatusSeeOther || !strings.Contains(loc, "decided=30") {
		t.Fatalf("the bulk decision: %d %s", status, loc)
	}
	id := confirm.Get("id")
	single("one-2")
	if _, err := keystore.ResolveMany(s.ctx, s.store, keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm", KeyPrefix: "won-"},
		Resolution: keystore.StateCompleted, By: "ann@example.com", Note: "written in the CRM", ID: "b-0000cafe"}); err != nil {
		t.Fatal(err)
	}

	_, page = fetch(t, c, s.url+"/ui/audit")
	rows := auditRows(page)
	if len(rows) != 4 {
		t.Fatalf("the audit list has %d rows, want 4 (two bulks, two singles):\n%s", len(rows), strings.Join(rows, "\n"))
	}
	for i, want := range [][]string{
		{`data-bulk="b-0000cafe"`, "<td>ann@example.com</td>", "marked 2 events as written", "Reason: written in the CRM", "2 keys (bulk b-0000cafe)"},
		{"<td>ops-cli</td><td>resolved the key: failed</td>", "bookings / one-2"},
		{`data-bulk="` + id + `"`, "<td>console: on-call</td>", "allowed 30 events to be sent again", "Reason: CRM incident 4711: retry after the fix",
			"30 keys (bulk " + id + ")", `href="/ui/audit?bulk=` + id + `"`},
		{"<td>ops-cli</td><td>resolved the key: failed</td>", "bookings / one-1"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i], w) {
				t.Errorf("audit row %d lacks %q:\n%s", i, w, rows[i])
			}
		}
	}

	_, page = fetch(t, c, s.url+"/ui/audit?bulk="+id)
	keys := auditRows(page)
	if len(keys) != 30 || !strings.Contains(page, `id="bulk-summary"`) || !strings.Contains(page, "allowed the events of its keys to be sent again. Reason: CRM incident 4711") {
		t.Fatalf("the bulk's page lists %d keys, want 30 with the decision above them:\n%s", len(keys), page)
	}
	for _, r := range keys {
		if !strings.Contains(r, "<td>console: on-call</td><td>resolved the key: failed</td>") || !strings.Contains(r, "bookings / bk-") {
			t.Fatalf("a key of the bulk: %s", r)
		}
	}
	if resp, _ := fetch(t, c, s.url+"/ui/audit?bulk=b-1,b-2"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a broken bulk id: %d, want 400", resp.StatusCode)
	}
	// An id no bulk decision has is not found, without a walk through the
	// event log.
	if resp, page := fetch(t, c, s.url+"/ui/audit?bulk=b-0000beef"); resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "no bulk decision") {
		t.Fatalf("an unknown bulk id: %d, want 404 saying so:\n%s", resp.StatusCode, page)
	}
}

var auditRowRE = regexp.MustCompile(`(?s)<tr[ >].*?</tr>`)

// auditRows are the body rows of the audit table.
func auditRows(page string) []string {
	i := strings.Index(page, "<tbody>")
	if i < 0 {
		return nil
	}
	return auditRowRE.FindAllString(page[i:], -1)
}

// The words of a bulk row: a completed bulk marks events as written, a
// final one failed for good, a retryable one allows them to be sent
// again; an action kept by an earlier release (no words) says failed.
func TestAuditWordsOfABulkDecision(t *testing.T) {
	ev := keystore.Event{At: time.Now(), Kind: keystore.EventKeyResolved, Namespace: "bookings", Key: "bk-1", Owner: "ann", Message: "failed", Bulk: "b-1"}
	for _, tc := range []struct {
		name   string
		action *keystore.BulkAction
		keys   int
		want   string
	}{
		{"retryable", &keystore.BulkAction{Resolution: keystore.StateFailed, By: "ann", Note: "n"}, 30, "allowed 30 events to be sent again"},
		{"re-run", &keystore.BulkAction{Resolution: keystore.StateFailed, Rerun: true, By: "ann", Note: "n"}, 3, "allowed 3 events to be sent again and re-ran their executions in n8n"},
		{"final", &keystore.BulkAction{Resolution: keystore.StateFailed, Final: true, By: "ann", Note: "n"}, 2000, "marked 2,000 events failed for good"},
		{"completed", &keystore.BulkAction{Resolution: keystore.StateCompleted, By: "ann", Note: "n"}, 1, "marked 1 event as written"},
		{"kept by an earlier release", &keystore.BulkAction{}, 3, "marked 3 events failed"},
	} {
		it, ok := console.AuditOfEntry(keystore.AuditEntry{Event: ev, Keys: tc.keys, Action: tc.action})
		if !ok || it.What != tc.want || it.Bulk != "b-1" {
			t.Errorf("%s: %+v, want %q", tc.name, it, tc.want)
		}
	}
}
