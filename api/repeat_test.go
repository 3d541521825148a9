package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/api/access"
)

// n8n's Retry On Fail repeats a reserve whose answer was lost: with its
// request_id it gets the same token, marked as a repeat; another
// request_id gets in_progress; after complete, duplicate_event.
func TestRepeatedReserve(t *testing.T) {
	e := start(t)
	body := obj{"namespace": ns, "key": "evt_1", "owner": "n8n exec 4711", "request_id": "4711/Reserve contact"}
	first := wantOK(t, e.post(t, "/v1/reserve", body), "accepted")
	if first["repeat"] != nil {
		t.Fatalf("the first answer is marked a repeat: %v", first)
	}
	r := e.post(t, "/v1/reserve", body)
	again := wantOK(t, r, "accepted")
	if again["token"] != first["token"] || again["repeat"] != true || again["proceed"] != true || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %s", r)
	}
	other := obj{"namespace": ns, "key": "evt_1", "owner": "n8n exec 4712", "request_id": "4712/Reserve contact"}
	if a := wantOK(t, e.post(t, "/v1/reserve", other), "in_progress"); a["token"] != nil {
		t.Fatalf("another request got a token: %v", a)
	}
	wantOK(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "evt_1", "token": again["token"]}), "completed")
	wantOK(t, e.post(t, "/v1/reserve", body), "duplicate_event")

	m := string(e.callWith(t, http.MethodGet, "/metrics", nil, nil).Body)
	if !strings.Contains(m, `n8n_guard_reserve_repeats_total{namespace="crm-contacts"} 1`) {
		t.Fatalf("repeats not counted")
	}
	p := wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_2", "request_id": strings.Repeat("x", 129)}), 400, "invalid_request")
	if len(p.Fields) != 1 || p.Fields[0].Field != "request_id" {
		t.Fatalf("problem: %+v", p)
	}
}

// A request_id is guessable (an execution id and a node name): another
// token sending the holder's gets an ordinary second copy's answer, never
// the holder's token. The holder itself still gets its repeat.
func TestRequestIDRepeatNeedsTheSamePrincipal(t *testing.T) {
	e := start(t, withScopes())
	body := obj{"namespace": ns, "key": "evt_1", "owner": "n8n exec 4711", "request_id": "4711/Reserve contact"}
	first := wantOK(t, e.post(t, "/v1/reserve", body), "accepted")
	for name, token := range map[string]string{
		"another unscoped token":           "second-token",
		"a reserve token of the namespace": scopedTokens[access.RoleReserve],
		"an admin token of the namespace":  scopedTokens[access.RoleAdmin],
	} {
		t.Run(name, func(t *testing.T) {
			r := e.callWith(t, http.MethodPost, "/v1/reserve", body, map[string]string{"Authorization": "Bearer " + token})
			a := wantOK(t, r, "in_progress")
			if a["token"] != nil || a["repeat"] != nil || r.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("another principal got the holder's token back: %s", r)
			}
		})
	}
	again := wantOK(t, e.post(t, "/v1/reserve", body), "accepted")
	if again["token"] != first["token"] || again["repeat"] != true {
		t.Fatalf("the holder's own repeat: %v", again)
	}
}
