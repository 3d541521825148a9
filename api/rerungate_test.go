package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/api"
)

// POST /v1/reserve over loopback HTTP of a key whose execution waits at
// its re-run gate: n8n running that execution again from its start (its
// first reserve has no rerun), n8n's retry of it under a new id and a copy
// from the source are all refused with 409 rerun_not_granted naming the
// execution that waits, counted, and nothing is written; after a
// person's grant the first of them writes, once.
func TestAReserveOfAKeyAtItsGateWaitsForAGrant(t *testing.T) {
	e := start(t, withAPI(api.Config{Reruns: &kicks{}}))
	const gated = "n8n wf1 exec 42"
	e.gatedKey(t, "ord-1", gated)
	for _, owner := range []string{gated, "n8n wf1 exec 58", "webhook"} {
		p := wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "ord-1", "owner": owner}), http.StatusConflict, "rerun_not_granted")
		if !strings.Contains(p.Detail, gated) || !strings.Contains(p.Detail, "nothing was written") {
			t.Fatalf("the refusal of %s does not name the execution at the gate or say nothing was written: %q", owner, p.Detail)
		}
	}
	if state, last := e.keyState(t, ns, "ord-1"); state != "failed" || last["event"] != "rerun_gate" || last["by"] != gated {
		t.Fatalf("the refused reserves changed the key: %s %v", state, last)
	}
	if m := string(e.get(t, "/metrics").Body); !strings.Contains(m, `n8n_guard_reserve_outcomes_total{namespace="`+ns+`",outcome="rerun_not_granted"} 4`) {
		t.Fatalf("the refusals (the gate's and three reserves') are not counted:\n%s", grepLines(m, "reserve_outcomes"))
	}
	wantOK(t, e.post(t, "/v1/resolve", obj{"namespace": ns, "key": "ord-1", "resolution": "failed", "rerun": true, "by": "ann@example.com", "note": "CRM back"}), "failed")
	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "ord-1", "owner": "n8n wf1 exec 58"}), "accepted")
	if r := e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "ord-1", "owner": "webhook"}); r.Status == http.StatusOK && r.JSON(t)["outcome"] == "accepted" {
		t.Fatalf("a second reserve after one grant was accepted too: %s", r)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
