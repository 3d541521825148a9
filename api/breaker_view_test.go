package api_test

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The attack of issue 44 (2), over HTTP on loopback: a reserve token
// limited to crm-contacts invents two keys and fails them
// destination_unreachable on a destination payments writes through. Only
// crm-contacts is paused (paused_for "namespace"); payments' next reserve
// goes through. When payments' own write fails too, two namespaces agree
// and the breaker opens for both, and for everyone else. An operator's
// maintenance hold still pauses every namespace.
func TestOneNamespaceCannotPauseADestinationOthersWriteThrough(t *testing.T) {
	const crmToken, payToken = "crm-reserve-token", "payments-reserve-token"
	tokens := []api.TokenScope{
		{Name: "crm", SHA256: sha256.Sum256([]byte(crmToken)), Role: access.RoleReserve, Namespaces: []string{"crm-contacts"}},
		{Name: "payments", SHA256: sha256.Sum256([]byte(payToken)), Role: access.RoleReserve, Namespaces: []string{"payments"}},
	}
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"ledger": {}}} // defaults: unreachable_threshold 2, cooldown 300 s
	e := start(t, withPolicies(pol), withAPI(api.Config{ScopedTokens: tokens}), withoutN8n())
	as := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }
	reserve := func(token, n, key string) map[string]any {
		t.Helper()
		r := e.callWith(t, http.MethodPost, "/v1/reserve", obj{"namespace": n, "key": key, "destination": "ledger", "owner": "n8n exec"}, as(token))
		if r.Status != http.StatusOK {
			t.Fatalf("reserve %s/%s: %s", n, key, r)
		}
		return r.JSON(t)
	}
	fail := func(token, n, key, tok string) {
		t.Helper()
		r := e.callWith(t, http.MethodPost, "/v1/fail", obj{"namespace": n, "key": key, "token": tok, "reason": "destination_unreachable"}, as(token))
		wantOK(t, r, "destination_failed")
	}
	written := func(token, n, key string) {
		t.Helper()
		a := reserve(token, n, key)
		if a["outcome"] != "accepted" {
			t.Fatalf("reserve %s/%s: %v", n, key, a)
		}
		wantOK(t, e.callWith(t, http.MethodPost, "/v1/complete", obj{"namespace": n, "key": key, "token": a["token"]}, as(token)), "completed")
	}

	written(payToken, "payments", "pay-1") // payments writes through ledger
	for _, key := range []string{"invented-1", "invented-2"} {
		a := reserve(crmToken, "crm-contacts", key)
		if a["outcome"] != "accepted" {
			t.Fatalf("reserve %s: %v", key, a)
		}
		fail(crmToken, "crm-contacts", key, a["token"].(string))
	}
	// crm-contacts paused itself, and says so.
	r := e.callWith(t, http.MethodPost, "/v1/reserve", obj{"namespace": "crm-contacts", "key": "invented-3", "destination": "ledger"}, as(crmToken))
	if a := wantOK(t, r, "destination_paused"); a["paused_for"] != "namespace" || r.Header.Get("Retry-After") != "300" {
		t.Fatalf("crm's reserve after its own failures: %s (Retry-After %q), want paused_for namespace, 300", r, r.Header.Get("Retry-After"))
	}
	// payments still writes.
	a := reserve(payToken, "payments", "pay-2")
	if a["outcome"] != "accepted" {
		t.Fatalf("payments' next reserve after crm's invented failures: %v, want accepted", a)
	}
	// The listing says the breaker is closed, open for crm-contacts only.
	d := destinationItem(t, e, "ledger")
	views, _ := d["namespace_breakers"].([]any)
	if d["state"] != "closed" || len(views) != 1 || views[0].(map[string]any)["namespace"] != "crm-contacts" || views[0].(map[string]any)["state"] != "open" {
		t.Fatalf("GET /v1/destinations: %v, want closed with crm-contacts' breaker open", d)
	}

	// payments' own write fails too: now two namespaces agree.
	fail(payToken, "payments", "pay-2", a["token"].(string))
	for _, c := range []struct{ token, n string }{{payToken, "payments"}, {crmToken, "crm-contacts"}, {testToken, "bookings"}} {
		r := e.callWith(t, http.MethodPost, "/v1/reserve", obj{"namespace": c.n, "key": "after-agreement", "destination": "ledger"}, as(c.token))
		if a := wantOK(t, r, "destination_paused"); a["paused_for"] != nil {
			t.Fatalf("%s after two namespaces failed: %s, want paused for every namespace", c.n, r)
		}
	}
	if d := destinationItem(t, e, "ledger"); d["state"] != "open" || d["namespace_breakers"] != nil {
		t.Fatalf("GET /v1/destinations after agreement: %v, want open for all", d)
	}

	// A person's maintenance hold pauses every namespace, from the start.
	until := e.clock.Now().Add(time.Hour).Format(time.RFC3339)
	if r := e.post(t, "/v1/destinations/hold", obj{"destination": "other-ledger", "by": "ops", "reason": "ERP upgrade", "until": until}); r.Status != http.StatusOK {
		t.Fatalf("hold: %s", r)
	}
	for _, c := range []struct{ token, n string }{{payToken, "payments"}, {crmToken, "crm-contacts"}} {
		r := e.callWith(t, http.MethodPost, "/v1/reserve", obj{"namespace": c.n, "key": "held-1", "destination": "other-ledger"}, as(c.token))
		if a := wantOK(t, r, "destination_paused"); a["paused_for"] != nil {
			t.Fatalf("%s under a maintenance hold: %s, want paused for every namespace", c.n, r)
		}
	}
}

// destinationItem is dest's item of GET /v1/destinations (unlimited token).
func destinationItem(t *testing.T, e *env, dest string) map[string]any {
	t.Helper()
	for _, it := range e.get(t, "/v1/destinations").JSON(t)["items"].([]any) {
		if m := it.(map[string]any); m["destination"] == dest {
			return m
		}
	}
	t.Fatalf("no destination %s in GET /v1/destinations", dest)
	return nil
}

// GET /v1/destinations shows a token limited to namespaces only its own
// namespaces' breakers: crm's pause on the destination "payments" is not
// told to a payments read token (it would learn another team's namespace).
func TestNamespaceBreakersAreShownToTheirOwnNamespacesOnly(t *testing.T) {
	const payRead = "payments-read-token"
	tokens := []api.TokenScope{{Name: "payments-read", SHA256: sha256.Sum256([]byte(payRead)), Role: access.RoleRead, Namespaces: []string{"payments"}}}
	e := start(t, withAPI(api.Config{ScopedTokens: tokens}), withoutN8n())
	a := e.reserve(t, "pay-1", obj{"namespace": "payments", "destination": "payments"})
	wantOK(t, e.post(t, "/v1/complete", obj{"namespace": "payments", "key": "pay-1", "token": a["token"]}), "completed")
	for _, key := range []string{"c-1", "c-2"} {
		tok := e.accepted(t, key, obj{"destination": "payments"})
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": key, "token": tok, "reason": "destination_unreachable"}), "destination_failed")
	}
	if views, _ := destinationItem(t, e, "payments")["namespace_breakers"].([]any); len(views) != 1 {
		t.Fatalf("the unlimited token sees %v, want crm-contacts' breaker", views)
	}
	r := e.callWith(t, http.MethodGet, "/v1/destinations", nil, map[string]string{"Authorization": "Bearer " + payRead})
	items, _ := r.JSON(t)["items"].([]any)
	if r.Status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["namespace_breakers"] != nil || strings.Contains(string(r.Body), ns) {
		t.Fatalf("payments' read token: %s, want the destination without crm-contacts' breaker", r)
	}
}
