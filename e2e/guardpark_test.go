//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// TestGuardParkCatchesUpABatch: `n8n guard --park` on an existing batch
// (schedule → the same open orders every 3 s, one twice → a POST per
// order). The CRM refuses connections when the guarded batch is
// published: the orders of its run park in n8n (several items of one
// execution behind one Wait node), the runs after it write nothing, and
// once the CRM is back the guard resumes them: each order is in the CRM
// exactly once, and stays so over the runs that follow.
func TestGuardParkCatchesUpABatch(t *testing.T) {
	s := newSuite(t, guardConfig)
	s.startN8N(t, nil, nil, nil, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	key, err := s.n8n.OwnerAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	api := publicAPI{base: s.n8n.URL(), key: key}
	cli := func(args ...string) (string, error) { return s.guardCLI(key, append([]string{"n8n"}, args...)...) }
	// Before any workflow parks: setup makes the resume credential from
	// the guard's data folder, for guard --park below.
	if out, err := cli("setup", "--guard-url", s.guard.URL(), "--create-credential", "--data", s.guard.dataDir()); err != nil || !strings.Contains(out, `create credential "n8n-guard resume"`) {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	id, err := api.createFromFile(ctx, filepath.Join(s.repo, "n8nsetup", "testdata", "unguarded", "schedule-split-post.json"), s.crm.URL())
	if err != nil {
		t.Fatal(err)
	}
	const ns = "e2e-batch"
	out, err := cli("guard", "--workflow", id, "--node", "Post order", "--key", "'batch-' + $json.id",
		"--namespace", ns, "--destination", "crm", "--park", "--data", s.guard.dataDir())
	if err != nil || !strings.Contains(out, "add node") {
		t.Fatalf("guard --park: %v\n%s", err, out)
	}
	t.Logf("guard --park:\n%s", out)

	orders := []string{"batch-order-1", "batch-order-2", "batch-order-3"}
	s.crm.Refuse()
	if err := api.publish(ctx, id, s.install.Major()); err != nil {
		t.Fatal(err)
	}
	testwait.WithinEvery(t, 2*time.Minute, testwait.Outside, "the three orders parked", func() bool {
		for _, o := range orders {
			if rec, err := s.guard.Lookup(ns, o); err != nil || rec.State != "parked" {
				return false
			}
		}
		return true
	})
	if w := s.crm.TotalWrites(); w != 0 {
		t.Fatalf("%d CRM writes during the outage", w)
	}
	if err := s.crm.Accept(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.waitCompletedIn(t, ns, orders, 90*time.Second)
	t.Logf("FIGURE 3 parked orders of a guarded batch caught up %.1f s after the CRM came back", time.Since(start).Seconds())
	// Three more runs hand the same orders out again: nothing more is
	// written.
	done := s.runs(t, ctx, api, id)
	testwait.WithinEvery(t, 2*time.Minute, testwait.Outside, "three more runs of the batch", func() bool { return s.runs(t, ctx, api, id) >= done+3 })
	for _, o := range orders {
		if w := s.crm.Writes(o); w != 1 {
			t.Errorf("%s written %d times, want once", o, w)
		}
	}
	if w := s.crm.TotalWrites(); w != len(orders) {
		t.Errorf("CRM writes in total = %d, want %d", w, len(orders))
	}
	// The three orders parked behind one Wait node with one resume URL:
	// the calls for the second and third find the execution finished,
	// their keys completed by it. Nothing was lost, and nobody is told so.
	log, err := os.ReadFile(s.guard.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "parked execution lost") {
		t.Errorf("the guard reported a parked execution lost although every order was written:\n%s", log)
	}
}
