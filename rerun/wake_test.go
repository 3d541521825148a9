package rerun_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// A grant is a commit of the store: it wakes the runner, which starts the
// re-run at once although nobody kicked it and its interval is an hour.
func TestAGrantWakesTheRunnerWithoutAKick(t *testing.T) {
	e := setup(t)
	e.atGate("k1", "41", "crm")
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour})
	e.grant("k1")
	wait(t, f, 1)
	if got := f.retries(); len(got) != 1 || got[0] != "41" {
		t.Fatalf("retries %v, want 41 once", got)
	}
}

// The runner is woken by the commits of granted keys alone: a burst of
// 1,000 reserves in another namespace, and keys failing at their gate,
// make it look at nothing, and the grant that follows wakes it at once,
// its first look after the start.
func TestABurstOfOtherCommitsDoesNotWakeTheRunner(t *testing.T) {
	e := setup(t)
	e.atGate("k1", "41", "crm")
	var looks atomic.Int64
	var atCall atomic.Int64
	f := newN8n(func(id string) (string, error) {
		atCall.CompareAndSwap(0, looks.Load())
		return "new-" + id, nil
	})
	r := newRunner(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); rerun.RunLooks(ctx, r, func() { looks.Add(1) }) }()
	t.Cleanup(func() { cancel(); <-done })
	testwait.For(t, "the runner's first look", func() bool { return looks.Load() == 1 })
	for i := range 1000 {
		if _, err := e.store.Reserve(e.ctx, keystore.ReserveRequest{Namespace: "other", Key: fmt.Sprint("evt_", i), Owner: "n8n wf9 exec 9"}); err != nil {
			t.Fatal(err)
		}
	}
	e.atGate("k2", "42", "crm") // at its gate, not granted
	e.grant("k1")
	wait(t, f, 1)
	if n := atCall.Load(); n != 2 {
		t.Fatalf("n8n was asked after the runner's look %d: want its second, woken by the grant (the other commits woke it %d times)", n, n-2)
	}
}
