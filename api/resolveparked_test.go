package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// POST /v1/resolve over loopback HTTP of a parked key whose execution
// waits in n8n for the guard's resume call: 409 parked_waiting, saying
// what to do instead, and nothing changes; with force it is decided and
// its history says the execution was left waiting in n8n; a bulk
// decision skips it (parked_waiting), as the console's key page and the
// CLI do (the one rule, keystore.ResolveParked).
func TestResolvingAWaitingParkedKeyOverHTTP(t *testing.T) {
	e := start(t, withPolicies(keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, UnreachableThreshold: 1}}}))
	tok := e.accepted(t, "evt_first", obj{"destination": "hubspot"})
	wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_first", "token": tok, "reason": "destination_unreachable"}), "destination_failed")
	resume := "http://n8n.local:5678/webhook-waiting/4711"
	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "destination": "hubspot", "resume_url": resume, "owner": execOwner(resume)}), "parked")

	body := obj{"namespace": ns, "key": "evt_1", "resolution": "completed", "by": "ann", "note": "entered by hand"}
	p := wantProblem(t, e.post(t, "/v1/resolve", body), http.StatusConflict, "parked_waiting")
	for _, want := range []string{"4711", "stop the execution in n8n", "force"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("the refusal does not say %q: %s", want, p.Detail)
		}
	}
	if state, last := e.keyState(t, ns, "evt_1"); state != "parked" || last["event"] == "resolved" {
		t.Fatalf("a refused resolution changed the key: %s %v", state, last)
	}
	r := e.post(t, "/v1/keys/resolve-bulk", obj{"filter": obj{"namespace": ns, "states": []string{"parked"}}, "resolution": "completed", "by": "ann", "note": "entered by hand"})
	bulk := r.JSON(t)
	if r.Status != http.StatusOK || bulk["decided"] != 0.0 || bulk["skipped"].(map[string]any)["parked_waiting"] != 1.0 {
		t.Fatalf("bulk: %v, want the parked key skipped as parked_waiting", bulk)
	}

	body["force"] = true
	wantOK(t, e.post(t, "/v1/resolve", body), "completed")
	if state, last := e.keyState(t, ns, "evt_1"); state != "completed" || !strings.Contains(last["detail"].(string), "left waiting in n8n") {
		t.Fatalf("a forced resolution: %s %v, want the history to say the execution was left waiting", state, last)
	}
}
