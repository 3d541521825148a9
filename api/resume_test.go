package api_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/api/access"
)

// The resume secret goes only where the operator said n8n is. A reserve
// token limited to one namespace opens a breaker with one failure, then
// tries to park keys with a resume URL of its own (reserve, and fail):
// each is refused with 400 naming resume_url and the rule, and nothing is
// recorded, so no resume call can ever go there.
func TestAResumeURLOutsideTheConfiguredN8nIsRefused(t *testing.T) {
	e := start(t, withScopes())
	var calls atomic.Int32
	own := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer own.Close()
	as := func(method, path string, body any) *resp {
		return e.callWith(t, method, path, body, map[string]string{"Authorization": "Bearer " + scopedTokens[access.RoleReserve]})
	}
	for _, key := range []string{"evt_open", "evt_open_2"} { // a destination nobody configured opens after 2 keys
		r := wantOK(t, as(http.MethodPost, "/v1/reserve", obj{"namespace": ns, "key": key, "destination": "never-configured"}), "accepted")
		wantOK(t, as(http.MethodPost, "/v1/fail", obj{"namespace": ns, "key": key, "token": r["token"], "reason": "destination_unreachable"}), "destination_failed")
	}

	for url, rule := range map[string]string{
		own.URL + "/webhook-waiting/1":       "resume_origin",
		"http://n8n.local:5678/webhook/x":    "resume_path",
		"http://n8n.local:5678/rest/login":   "resume_path",
		"http://169.254.169.254/latest/meta": "resume_origin",
	} {
		p := wantProblem(t, as(http.MethodPost, "/v1/reserve", obj{"namespace": ns, "key": "evt_steal", "destination": "never-configured", "resume_url": url, "owner": execOwner(url)}),
			http.StatusBadRequest, "invalid_request")
		if len(p.Fields) != 1 || p.Fields[0].Field != "resume_url" || p.Fields[0].Rule != rule {
			t.Errorf("reserve with %s: fields %+v, want resume_url rule %s", url, p.Fields, rule)
		}
	}
	wantOK(t, e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_steal"), "absent")

	// The same through fail: the key stays as it was, not parked.
	r2 := wantOK(t, as(http.MethodPost, "/v1/reserve", obj{"namespace": ns, "key": "evt_2"}), "accepted")
	p := wantProblem(t, as(http.MethodPost, "/v1/fail", obj{"namespace": ns, "key": "evt_2", "token": r2["token"], "reason": "destination_unreachable", "resume_url": own.URL + "/webhook-waiting/2"}),
		http.StatusBadRequest, "invalid_request")
	if len(p.Fields) != 1 || p.Fields[0].Rule != "resume_origin" {
		t.Errorf("fail: fields %+v", p.Fields)
	}
	if got := wantOK(t, e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_2"), "found"); got["state"] != "reserved" || got["resume_url"] != nil {
		t.Fatalf("the refused fail changed the key: %v", got)
	}
	// n8n's own resume URL is accepted as configured.
	wantOK(t, as(http.MethodPost, "/v1/reserve", obj{"namespace": ns, "key": "evt_ok", "destination": "never-configured", "resume_url": "http://n8n.local:5678/webhook-waiting/9", "owner": execOwner("http://n8n.local:5678/webhook-waiting/9")}), "parked")
	if calls.Load() != 0 {
		t.Fatalf("the caller's listener was called %d times", calls.Load())
	}
}

// Without a configured n8n, parking is refused with a problem naming the
// setting, rather than silently answering destination_paused.
func TestParkingWithoutAConfiguredN8nIsRefused(t *testing.T) {
	e := start(t, withoutN8n())
	p := wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "resume_url": "http://n8n.local:5678/webhook-waiting/1", "owner": execOwner("http://n8n.local:5678/webhook-waiting/1")}), http.StatusBadRequest, "invalid_request")
	if len(p.Fields) != 1 || p.Fields[0].Rule != "resume_unconfigured" {
		t.Fatalf("fields %+v, want resume_unconfigured", p.Fields)
	}
	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"}), "accepted")
}
