package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A reserve's summary over HTTP: recorded and answered by the reserve,
// the lookup, the key's path and the listing; e-mail addresses masked; a
// summary too long, multi-line or not a string is 400 invalid_request
// naming the field, and nothing is recorded.
func TestReserveSummaryIsRecordedAndAnswered(t *testing.T) {
	e := start(t, withPolicies(keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		"invoices": {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}))
	const summary = "Invoice 4711 · 12,000 EUR · ACME"
	resume := "http://n8n.local:5678/webhook-waiting/4711"
	a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": "invoices", "key": "inv_4711", "resume_url": resume, "owner": execOwner(resume),
		"requested_by": "ann", "payload": invoice, "summary": summary}), "parked")
	if a["summary"] != summary || a["awaiting_approval"] != true {
		t.Fatalf("reserve answered %v", a)
	}
	if l := wantOK(t, e.get(t, "/v1/lookup?namespace=invoices&key=inv_4711"), "found"); l["summary"] != summary {
		t.Fatalf("lookup answered %v", l)
	}
	if k := wantOK(t, e.get(t, "/v1/keys/invoices/inv_4711"), "found"); k["summary"] != summary {
		t.Fatalf("the key's path answered %v", k)
	}
	page := e.get(t, "/v1/keys?namespace=invoices").JSON(t)
	if items := page["items"].([]any); len(items) != 1 || items[0].(map[string]any)["summary"] != summary {
		t.Fatalf("listing: %v", page)
	}

	r := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_mail", "summary": "Order 17 for ann@example.com"}), "accepted")
	if s, _ := r["summary"].(string); strings.Contains(s, "ann@example.com") || !strings.HasPrefix(s, "Order 17 for ") {
		t.Fatalf("summary answered as %q, want the e-mail address masked", s)
	}
	plain := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_plain"}), "accepted")
	if _, ok := plain["summary"]; ok {
		t.Fatalf("a reserve without a summary answered one: %v", plain)
	}

	for name, bad := range map[string]any{"201 characters": strings.Repeat("€", 201), "two lines": "Invoice 4711\nACME", "a number": 4711} {
		p := wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_bad", "summary": bad}), http.StatusBadRequest, "invalid_request")
		if !strings.Contains(p.Detail, "summary") {
			t.Fatalf("%s: the refusal does not name the field: %+v", name, p)
		}
		wantOK(t, e.get(t, "/v1/lookup?"+url.Values{"namespace": {ns}, "key": {"evt_bad"}}.Encode()), "absent")
	}
}
