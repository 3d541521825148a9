//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// TestRerunAfterACRMOutageWritesEachEventOnce: a workflow guarded by
// `n8n guard` (no parking) meets a CRM that answers 500 to three leads:
// each execution fails at its re-run gate and nothing is written. n8n's
// own retry of one, without a person's grant, fails at the gate again and
// writes nothing. Then a person allows a retry and re-run: one key by
// itself, the others in one bulk. The guard asks n8n to retry the three
// executions; each re-run reserves its key again and writes it once. A
// second click and the same bulk again re-run nothing.
func TestRerunAfterACRMOutageWritesEachEventOnce(t *testing.T) {
	s := newSuite(t, guardConfig)
	s.startN8N(t, nil, nil, nil, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	key, err := s.n8n.OwnerAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	api := publicAPI{base: s.n8n.URL(), key: key}
	// The operator gives the guard n8n's API, as docs/api.md says: it
	// re-runs executions through it and nowhere else.
	s.guard.Stop()
	s.guard.env = append(s.guard.env, "N8N_API_URL="+s.n8n.URL()+"/api/v1", "N8N_API_KEY="+key)
	if err := s.guard.start(); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) { return s.guardCLI(key, append([]string{"n8n"}, args...)...) }
	if out, err := cli("setup", "--guard-url", s.guard.URL(), "--create-credential"); err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	id, err := api.createFromFile(ctx, filepath.Join(s.repo, "n8nsetup", "testdata", "unguarded", "webhook-post.json"), s.crm.URL())
	if err != nil {
		t.Fatal(err)
	}
	const ns = "e2e-rerun"
	out, err := cli("guard", "--workflow", id, "--node", "Create contact", "--key", "$json.body.event_id", "--namespace", ns, "--destination", "crm")
	if err != nil || !strings.Contains(out, "re-run gate") {
		t.Fatalf("guard: %v\n%s", err, out)
	}
	if err := api.publish(ctx, id, s.install.Major()); err != nil {
		t.Fatal(err)
	}

	leads := []string{"rerun-lead-1", "rerun-lead-2", "rerun-lead-3"}
	for _, l := range leads {
		s.crm.Plan(l, answer500) // the CRM's outage: nothing written
		// A workflow just published may take a moment to take its webhook:
		// a 404 ran nothing, so the lead is sent again.
		var r reply
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
			if r = s.send(t, "n8n-guard-e2e/audit-lead", lead(l, l+"@example.com")); r.Status != http.StatusNotFound || time.Now().After(deadline) {
				break
			}
		}
		t.Logf("%s during the outage: %s", l, tail(r.Raw, 300))
	}
	testwait.WithinEvery(t, 2*time.Minute, testwait.Outside, "each lead failed and waiting at its re-run gate", func() bool {
		for _, l := range leads {
			if rec, err := s.guard.Lookup(ns, l); err != nil || rec.State != "failed" || rec.last() != "rerun_gate" {
				return false
			}
		}
		return true
	})
	if w := s.crm.TotalWrites(); w != 0 {
		t.Fatalf("%d CRM writes during the outage", w)
	}

	// n8n's own retry of the first execution, nobody having allowed it:
	// it fails at the gate again and writes nothing.
	first := s.lookup(t, ns, leads[0])
	gate := first.History[len(first.History)-1].By
	exec := gate[strings.LastIndex(gate, " ")+1:]
	err = api.call(ctx, http.MethodPost, "/executions/"+exec+"/retry", map[string]any{"loadWorkflow": true}, nil)
	t.Logf("n8n's retry of execution %s without a grant: %v", exec, err)
	testwait.WithinEvery(t, time.Minute, testwait.Outside, "n8n's own retry stopped at the gate", func() bool {
		rec, err := s.guard.Lookup(ns, leads[0])
		return err == nil && rec.last() == "rerun_gate" && rec.History[len(rec.History)-1].By != gate
	})
	if w := s.crm.TotalWrites(); w != 0 {
		t.Fatalf("n8n's retry without a grant wrote %d times", w)
	}

	// An attacker holding a reserve token writes a key of another
	// namespace whose holder names the third lead's execution, and gets
	// its re-run allowed: n8n's run data shows that execution never
	// reserved it, so it is refused and the lead's own re-run goes on.
	third := s.lookup(t, ns, leads[2]).History
	forged := map[string]any{"namespace": "e2e-forged", "key": "forged-1", "owner": third[len(third)-1].By}
	var taken map[string]any
	if err := callJSON(ctx, http.MethodPost, s.guard.URL()+"/v1/reserve", "Authorization", "Bearer "+guardToken, forged, &taken); err != nil || taken["token"] == nil {
		t.Fatalf("forged reserve: %v %v", err, taken)
	}
	if err := callJSON(ctx, http.MethodPost, s.guard.URL()+"/v1/fail", "Authorization", "Bearer "+guardToken, map[string]any{
		"namespace": "e2e-forged", "key": "forged-1", "token": taken["token"], "reason": "destination_failed"}, nil); err != nil {
		t.Fatal(err)
	}
	forged["rerun"] = true
	err = callJSON(ctx, http.MethodPost, s.guard.URL()+"/v1/reserve", "Authorization", "Bearer "+guardToken, forged, nil)
	if rec := s.lookup(t, "e2e-forged", "forged-1"); rec.last() != "rerun_gate" {
		t.Fatalf("the forged gate: %v, history %+v", err, rec.History)
	}
	if err := callJSON(ctx, http.MethodPost, s.guard.URL()+"/v1/resolve", "Authorization", "Bearer "+guardToken, map[string]any{
		"namespace": "e2e-forged", "key": "forged-1", "resolution": "failed", "rerun": true, "by": "Mallory", "note": "please"}, nil); err != nil {
		t.Fatal(err)
	}

	// A person allows a retry and re-run: the first lead by itself...
	resolve := func() (int, string) {
		var ans map[string]any
		err := callJSON(ctx, http.MethodPost, s.guard.URL()+"/v1/resolve", "Authorization", "Bearer "+guardToken, map[string]any{
			"namespace": ns, "key": leads[0], "resolution": "failed", "rerun": true, "by": "Ana", "note": "the CRM is back"}, &ans)
		if err != nil {
			return 0, err.Error()
		}
		return 200, ans["outcome"].(string)
	}
	if status, outcome := resolve(); status != 200 || outcome != "failed" {
		t.Fatalf("allow a retry and re-run: %d %s", status, outcome)
	}
	// ... and the other two in one bulk.
	bulk := func() map[string]any {
		var res map[string]any
		if err := callJSON(ctx, http.MethodPost, s.guard.URL()+"/v1/keys/resolve-bulk", "Authorization", "Bearer "+guardToken, map[string]any{
			"filter": map[string]any{"namespace": ns, "key_prefix": "rerun-lead-"}, "resolution": "failed", "rerun": true,
			"by": "Ana", "note": "the CRM is back", "id": "rerun-e2e"}, &res); err != nil {
			t.Fatalf("bulk re-run: %v", err)
		}
		return res
	}
	res := bulk()
	t.Logf("bulk re-run: %v", res)
	start := time.Now()
	s.waitCompletedIn(t, ns, leads, 2*time.Minute)
	t.Logf("FIGURE 3 failed leads re-run and written %.1f s after the person allowed it", time.Since(start).Seconds())
	for _, l := range leads {
		if w := s.crm.Writes(l); w != 1 {
			t.Errorf("%s written %d times, want once", l, w)
		}
	}
	// The guard logs "re-run started" when n8n answers its retry, which on
	// a loaded machine can come after the retried execution wrote.
	var log []byte
	started := 0
	testwait.Poll(time.Minute, func() bool {
		log, _ = os.ReadFile(s.guard.logPath)
		started = strings.Count(string(log), "re-run started")
		return started >= len(leads)
	})
	if started != len(leads) {
		t.Errorf("the guard started %d re-runs for %d leads:\n%s", started, len(leads), log)
	}

	testwait.WithinEvery(t, time.Minute, testwait.Outside, "the forged key's re-run refused", func() bool {
		rec, err := s.guard.Lookup("e2e-forged", "forged-1")
		return err == nil && rec.last() == "rerun_refused"
	})
	if h := s.lookup(t, "e2e-forged", "forged-1").History; !strings.Contains(h[len(h)-1].Detail, "is not one of workflow") {
		t.Errorf("the forged key's refusal says %q", h[len(h)-1].Detail)
	}

	// A second click and the same bulk again re-run nothing.
	if status, outcome := resolve(); status == 200 {
		t.Errorf("a second allow of a completed lead: %s", outcome)
	}
	if again := bulk(); again["decided"].(float64) != 0 {
		t.Errorf("the same bulk again decided %v", again)
	}
	time.Sleep(5 * time.Second)
	log, _ = os.ReadFile(s.guard.logPath)
	if n := strings.Count(string(log), "re-run started"); n != started {
		t.Errorf("re-runs started after the second click and bulk: %d, before %d", n, started)
	}
	if w := s.crm.TotalWrites(); w != len(leads) {
		t.Errorf("CRM writes in total = %d, want %d", w, len(leads))
	}
}
