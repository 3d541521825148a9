package console_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Four eyes in the console, over HTTP: whoever is signed in is compared
// with the requester as the person they are (a named token's person, the
// e-mail and subject an identity provider vouched for), whatever the
// spelling the request was recorded with.

func gatedPolicies(people keystore.People) keystore.Policies {
	return keystore.Policies{People: people, Namespaces: map[string]keystore.NamespacePolicy{
		"invoices": {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}
}

// requestApproval records a request for approval of key by who, as a
// workflow's reserve does.
func requestApproval(s *site, key, who string) error {
	_, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "invoices", Key: key, Owner: "n8n exec 7",
		RequestedBy: who, ResumeURL: "http://n8n.local/webhook-waiting/" + key, Fingerprint: "invoice " + key})
	return err
}

// approveAs sends the approvals page's Approve form; it returns the
// status and the page's problem ("" when none).
func approveAs(t *testing.T, s *site, c *http.Client, csrf, key string) (int, string) {
	t.Helper()
	resp := postForm(t, c, s.url+"/ui/approvals/decide", url.Values{"csrf": {csrf}, "namespace": {"invoices"}, "key": {key}, "action": {"approve"}})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if i := strings.Index(page, `id="approval-problem">`); i >= 0 {
		p := page[i+len(`id="approval-problem">`):]
		return resp.StatusCode, html.UnescapeString(p[:strings.Index(p, "<")])
	}
	return resp.StatusCode, ""
}

func wantFourEyes(t *testing.T, s *site, status int, problem, key string) {
	t.Helper()
	if status != http.StatusForbidden || !strings.Contains(problem, "triggered this event") || !strings.Contains(problem, "four eyes") {
		t.Fatalf("approving %s: %d %q, want the four-eyes refusal", key, status, problem)
	}
	if r := s.lookup("invoices", key); r.Reason != keystore.ReasonAwaitingApproval {
		t.Fatalf("a refused approval changed %s: %s", key, r.Reason)
	}
}

// A token that names its person is that person: she may not approve what
// she requested, however the request spelled her.
// Mutation tried: the person's name left out of the console's identities
// (Principal.Identities without PersonName): ana approves her own request.
func TestConsoleFourEyesKnowsANamedTokensPerson(t *testing.T) {
	s, _ := siteOn(t, gatedPolicies(keystore.People{}))
	for key, who := range map[string]string{"inv-1": "ana@example.com", "inv-2": " ANA@example.com\u00a0", "inv-3": "bob@example.com"} {
		if err := requestApproval(s, key, who); err != nil {
			t.Fatal(err)
		}
	}
	c, csrf := signedIn(t, s, personToken)
	for _, key := range []string{"inv-1", "inv-2"} {
		status, problem := approveAs(t, s, c, csrf, key)
		wantFourEyes(t, s, status, problem, key)
	}
	if status, problem := approveAs(t, s, c, csrf, "inv-3"); status != http.StatusSeeOther {
		t.Fatalf("approving another person's request: %d %q", status, problem)
	}
	if r := s.lookup("invoices", "inv-3"); r.Reason != keystore.ReasonApproved || r.ResolvedBy != "ana@example.com (console, token ops-ana)" {
		t.Fatalf("inv-3: %s by %q", r.Reason, r.ResolvedBy)
	}
}

// Signed in through the identity provider, the six spellings of her
// address are refused where they are recorded or are her; with people:,
// so are her Slack user and her other address, found through the subject
// the provider vouched for.
// Mutation tried: the subject left out of the identities: the Slack user's
// request is refused only as "cannot tell", not as hers.
func TestConsoleFourEyesKnowsTheSignedInPerson(t *testing.T) {
	t.Run("six spellings", func(t *testing.T) {
		o := newOIDCSiteWith(t, gatedPolicies(keystore.People{}))
		var stored []string
		for i, tc := range []struct{ spelling, rule string }{
			{" ana@example.com", ""},
			{"ana@example.com\u200b", "no_format"},
			{"ana@example.com\u00a0", ""},
			{"\u0430na@example.com", "one_script"},
			{"ANA\u2010@example.com", ""},
			{"\uff41\uff4e\uff41@example.com", ""},
		} {
			key := "inv-" + strconv.Itoa(i)
			err := requestApproval(o.site, key, tc.spelling)
			if tc.rule != "" {
				if e, ok := err.(*errs.Error); !ok || e.Code != errs.InvalidRequest || e.Fields[0].Rule != tc.rule {
					t.Fatalf("%q: %v, want invalid_request, rule %s", tc.spelling, err, tc.rule)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			stored = append(stored, key)
		}
		c, csrf := o.signedInAs(t, "ana@example.com")
		if strings.Join(stored, ",") != "inv-0,inv-2,inv-4,inv-5" {
			t.Fatalf("recorded %v", stored)
		}
		for _, key := range []string{"inv-0", "inv-2", "inv-5"} {
			status, problem := approveAs(t, o.site, c, csrf, key)
			wantFourEyes(t, o.site, status, problem, key)
		}
		// The hyphen: "ana-@example.com" is another address; its owner is
		// the one who may not approve.
		c, csrf = o.signedInAs(t, "Ana-@example.com", "guard-admins")
		status, problem := approveAs(t, o.site, c, csrf, "inv-4")
		wantFourEyes(t, o.site, status, problem, "inv-4")
	})

	t.Run("her Slack user and her other address, through people:", func(t *testing.T) {
		people, err := keystore.NewPeople(map[string][]string{
			"ana": {"U0ANA", "ana.private@example.com", "sub-ana@example.com"},
			"bob": {"bob@example.com"},
		})
		if err != nil {
			t.Fatal(err)
		}
		o := newOIDCSiteWith(t, gatedPolicies(people))
		for key, who := range map[string]string{"inv-1": "U0ANA", "inv-2": "ana.private@example.com"} {
			if err := requestApproval(o.site, key, who); err != nil {
				t.Fatal(err)
			}
		}
		c, csrf := o.signedInAs(t, "ana@example.com")
		for _, key := range []string{"inv-1", "inv-2"} {
			status, problem := approveAs(t, o.site, c, csrf, key)
			wantFourEyes(t, o.site, status, problem, key)
		}
		// Someone people: does not know may not decide.
		c, csrf = o.signedInAs(t, "x@example.com", "guard-admins")
		if status, problem := approveAs(t, o.site, c, csrf, "inv-1"); status != http.StatusForbidden || !strings.Contains(problem, "people:") {
			t.Fatalf("an unknown person approving: %d %q", status, problem)
		}
		c, csrf = o.signedInAs(t, "bob@example.com", "guard-admins")
		if status, problem := approveAs(t, o.site, c, csrf, "inv-1"); status != http.StatusSeeOther {
			t.Fatalf("another person approving: %d %q", status, problem)
		}
	})
}

// issueSpellings are the requester spellings of issue 44 Ana approved
// herself with, signed in as ana@example.com, before four eyes read
// addresses as addresses.
var issueSpellings = []string{"Ana Lopez <ana@example.com>", "mailto:ana@example.com", "ana+x@example.com", "ana@example.com.",
	"aná@example.com", "Ana\u2010Lopez"}

// Signed in through the identity provider as ana@example.com (Ana-Lopez
// under people:), each spelling of issue 44 is refused before anything is
// decided, the page saying why; bob approves a request by
// "Bob <bob@example.com>". Mutation: the address forms left out of
// keystore's forms: the address spellings are approved.
func TestConsoleFourEyesReadsAddressesAsAddresses(t *testing.T) {
	people, err := keystore.NewPeople(map[string][]string{"ana": {"ana@example.com", "Ana-Lopez"}, "bob": {"bob@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	o := newOIDCSiteWith(t, gatedPolicies(people))
	for i, who := range append(issueSpellings, "Bob <bob@example.com>") {
		if err := requestApproval(o.site, "inv-"+strconv.Itoa(i), who); err != nil {
			t.Fatalf("%q: %v", who, err)
		}
	}
	c, csrf := o.signedInAs(t, "ana@example.com")
	for i, who := range issueSpellings {
		key := "inv-" + strconv.Itoa(i)
		status, problem := approveAs(t, o.site, c, csrf, key)
		wantFourEyes(t, o.site, status, problem, key)
		if !strings.Contains(problem, "requester") {
			t.Fatalf("%q: the refusal does not say why: %q", who, problem)
		}
	}
	if status, problem := approveAs(t, o.site, c, csrf, "inv-"+strconv.Itoa(len(issueSpellings))); status != http.StatusSeeOther {
		t.Fatalf("ana approving bob's request: %d %q", status, problem)
	}
}
