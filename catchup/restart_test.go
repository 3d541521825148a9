package catchup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// gatedN8n wakes each execution at once; the woken execution reserves
// its key and stays in the CRM until the gate opens, then completes,
// through whatever store is open now (the test reopens it).
type gatedN8n struct {
	store    atomic.Pointer[bolt.Store]
	gate     chan struct{}
	inCRM    atomic.Int32
	maxInCRM atomic.Int32
	wg       sync.WaitGroup
}

func (f *gatedN8n) Resume(_ context.Context, r *keystore.Record) n8n.ResumeOutcome {
	res, err := f.store.Load().Reserve(context.Background(), keystore.ReserveRequest{Namespace: r.Namespace, Key: r.Key, Destination: r.Destination, ResumeURL: r.ResumeURL})
	if err != nil || res.Outcome != keystore.OutcomeAccepted {
		return n8n.ResumeOutcome{Answer: keystore.ResumeAccepted, Status: 200} // woken; its reserve went elsewhere
	}
	n := f.inCRM.Add(1)
	for m := f.maxInCRM.Load(); n > m && !f.maxInCRM.CompareAndSwap(m, n); m = f.maxInCRM.Load() {
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		<-f.gate
		f.inCRM.Add(-1)
		f.store.Load().Complete(context.Background(), keystore.CompleteRequest{Namespace: r.Namespace, Key: r.Key, Token: res.Token})
	}()
	return n8n.ResumeOutcome{Answer: keystore.ResumeAccepted, Status: 200}
}

// refusals counts the turns a store refused.
type refusals struct {
	catchupStore
	n atomic.Int32
}

func (r *refusals) TakeResumeTurn(ctx context.Context, req keystore.TurnRequest) (keystore.Turn, bool, time.Duration, error) {
	t, ok, wait, err := r.catchupStore.TakeResumeTurn(ctx, req)
	if err == nil && !ok && wait == 0 {
		r.n.Add(1)
	}
	return t, ok, wait, err
}

// A guard stopped mid catch-up, its bbolt file closed and opened again by
// the next guard, while the executions it woke still run: the next guard
// does not start more than catch_up_concurrency minus those (what is in
// flight is read from the file, not from the memory of the guard that
// stopped), and starts the rest once they finished.
func TestInFlightStaysWithinTheLimitAcrossAReopen(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 100, CatchUpConcurrency: 2, UnreachableThreshold: 1}}}
	path := filepath.Join(t.TempDir(), "guard.db")
	open := func() *bolt.Store {
		s, err := bolt.Open(path, bolt.Options{Policies: pol})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	first := open()
	res, _ := first.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_first", Destination: "crm"})
	first.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_first", Token: res.Token, Reason: keystore.ReasonDestinationUnreachable})
	const parked = 6
	for i := range parked {
		if res, err := first.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: fmt.Sprintf("evt_%02d", i), Destination: "crm",
			ResumeURL: fmt.Sprintf("http://n8n/webhook-waiting/%d", i)}); err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("park: %+v %v", res, err)
		}
	}
	if _, err := first.ResetBreaker(ctx, "crm", "test", "the CRM is back"); err != nil {
		t.Fatal(err)
	}
	fake := &gatedN8n{gate: make(chan struct{})}
	fake.store.Store(first)
	opts := func(s catchupStore) catchup.Options {
		return catchup.Options{Store: s, Policies: pol, Resumer: fake, Interval: 10 * time.Millisecond, Claim: 2 * time.Minute}
	}

	// The first guard wakes two executions, which stay in the CRM; it stops.
	r1, err := catchup.New(opts(first))
	if err != nil {
		t.Fatal(err)
	}
	ctx1, stop1 := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() { done1 <- r1.Run(ctx1) }()
	testwait.For(t, "two executions in the CRM", func() bool { return fake.inCRM.Load() == 2 })
	stop1()
	<-done1
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// The next guard opens the file while they still run.
	second := open()
	defer second.Close()
	fake.store.Store(second)
	view := &refusals{catchupStore: second}
	r2, err := catchup.New(opts(view))
	if err != nil {
		t.Fatal(err)
	}
	ctx2, stop2 := context.WithCancel(ctx)
	defer stop2()
	done2 := make(chan error, 1)
	go func() { done2 <- r2.Run(ctx2) }()
	testwait.For(t, "the next guard refused a turn three times, or more executions in the CRM", func() bool {
		return view.n.Load() >= 3 || fake.inCRM.Load() > 2
	})
	if n := fake.maxInCRM.Load(); n > 2 {
		t.Fatalf("%d executions in the CRM at once after the reopen: catch_up_concurrency is 2", n)
	}
	close(fake.gate) // they finish: the rest goes
	testwait.For(t, "every parked event resumed and completed", func() bool {
		c, err := second.Counts(ctx)
		return err == nil && c[ns][keystore.StateCompleted] == parked
	})
	stop2()
	<-done2
	fake.wg.Wait()
	if n := fake.maxInCRM.Load(); n > 2 {
		t.Fatalf("%d executions in the CRM at once: catch_up_concurrency is 2", n)
	}
}
