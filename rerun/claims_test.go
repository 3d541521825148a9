package rerun_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

func newRunner(t *testing.T, e *env, f rerun.Executions, opts rerun.Options) *rerun.Runner {
	t.Helper()
	opts.Registerer = prometheus.NewRegistry()
	r, err := rerun.New(e.store, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A retry n8n takes longer than a claim to answer (a big execution, a
// slow n8n) is asked once: its guard keeps the claim while it waits, so
// a second guard on the same store finds it in flight however much time
// passes, and never asks n8n a second time for one grant.
func TestARetryLongerThanAClaimIsAskedOnce(t *testing.T) {
	clock := fakeclock.New()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "guard.db"), ctx: context.Background(), clock: clock.Now}
	e.open()
	e.atGate("k1", "41", "crm")
	e.grant("k1")
	asked, answer := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f := newN8n(func(id string) (string, error) {
		first := false
		once.Do(func() { close(asked); first = true })
		if first {
			<-answer // n8n answers the first ask when the test says so
		}
		return "new-" + id, nil
	})
	const claim = time.Minute
	run(t, e, f, rerun.Options{Name: "guard-a", Clock: clock.Now, Claim: claim, Reads: -1, Pace: time.Millisecond, Interval: time.Hour})
	t.Cleanup(func() { close(answer) }) // before the runner's cleanup, which waits for its call
	<-asked
	other := newRunner(t, e, f, rerun.Options{Name: "guard-b", Clock: clock.Now, Claim: claim, Reads: -1, Pace: time.Millisecond, Interval: time.Hour})
	held := e.last("k1").At
	for range 4 { // two claims' time in all
		clock.Advance(claim/2 + time.Second)
		extended := testwait.Poll(10*time.Second, func() bool {
			l := e.last("k1")
			return l.Event == keystore.HistoryRerunStarting && l.At.After(held)
		})
		rerun.Round(e.ctx, other)
		if got, l := f.retries(), e.last("k1"); len(got) != 1 || l.By != "guard-a" {
			t.Fatalf("n8n was asked %v, the key's last entry is %+v: a second guard took a claim whose call is in flight", got, l)
		}
		if !extended {
			t.Errorf("the claim of %v was not extended while n8n is asked", held)
		}
		held = e.last("k1").At
	}
	answer <- struct{}{}
	testwait.For(t, "n8n's answer noted", func() bool { return e.last("k1").Event == keystore.HistoryRerunStarted })
	if got := f.retries(); len(got) != 1 || got[0] != "41" {
		t.Fatalf("n8n was asked %v, want 41 once", got)
	}
}

// A guard that stops (SIGTERM) before it asked n8n hands back the claims
// of every key of the execution: another guard claims the re-run at once
// and asks n8n, without waiting for a lapse.
func TestAGuardStoppedBeforeItAskedHandsItsClaimsBack(t *testing.T) {
	e := setup(t)
	e.atGate("first", "41", "crm")
	e.grant("first")
	e.atGate("p", "42", "mail")
	e.atGate("q", "42", "mail") // granted with p by the guard
	e.grant("p")
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	ctx, stop := context.WithCancel(e.ctx)
	// One read of n8n's API in 1,000 s: 41 takes the first, 42 waits for
	// the next, and the guard is stopped while it waits.
	stopping := newRunner(t, e, f, rerun.Options{Name: "guard-a", Reads: 0.001, Pace: time.Millisecond, Interval: time.Hour,
		Sleep: func(context.Context, time.Duration) { stop() }})
	rerun.Round(ctx, stopping)
	if got := f.retries(); len(got) != 1 || got[0] != "41" {
		t.Fatalf("the stopping guard asked n8n %v, want 41 alone", got)
	}
	for _, k := range []string{"p", "q"} {
		if l := e.last(k); l.Event != keystore.HistoryRerunGranted {
			t.Fatalf("%s after the guard stopped: %+v, want its claim handed back (granted)", k, l)
		}
	}
	rerun.Round(e.ctx, newRunner(t, e, f, rerun.Options{Name: "guard-b", Reads: -1, Pace: time.Millisecond, Interval: time.Hour}))
	if got := f.retries(); len(got) != 2 || got[1] != "42" {
		t.Fatalf("n8n was asked %v, want 42 asked by the second guard at once", got)
	}
	for _, k := range []string{"p", "q"} {
		if l := e.last(k); l.Event != keystore.HistoryRerunStarted || l.Detail != "new-42" {
			t.Fatalf("%s: %+v, want the re-run the second guard started", k, l)
		}
	}
}
