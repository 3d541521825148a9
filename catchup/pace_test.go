package catchup_test

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// stepClock is a controlled clock: it moves only when the runner waits
// (Options.Sleep), by exactly what it waits, so the pace is read off the
// clock and not off a loaded machine's timing. It is a fakeclock.Clock
// started at now on first use, so that &stepClock{now: t} makes one.
type stepClock struct {
	now   time.Time // where the clock starts; read once
	start sync.Once
	clock *fakeclock.Clock
}

func (c *stepClock) fake() *fakeclock.Clock {
	c.start.Do(func() { c.clock = fakeclock.At(c.now) })
	return c.clock
}

func (c *stepClock) Now() time.Time          { return c.fake().Now() }
func (c *stepClock) Advance(d time.Duration) { c.fake().Advance(d) }

// Sleep moves the clock by d, then lets the other goroutines (the fake
// n8n's executions, real HTTP) run a moment.
func (c *stepClock) Sleep(ctx context.Context, d time.Duration) {
	c.fake().Sleep(ctx, d)
	select {
	case <-ctx.Done():
	case <-time.After(time.Millisecond):
	}
}

// pacedResumer notes the controlled clock at each resume call.
type pacedResumer struct {
	inner catchup.Resumer
	clock *stepClock
	mu    sync.Mutex
	at    []time.Time
}

func (p *pacedResumer) Resume(ctx context.Context, r *keystore.Record) n8n.ResumeOutcome {
	p.mu.Lock()
	p.at = append(p.at, p.clock.Now())
	p.mu.Unlock()
	return p.inner.Resume(ctx, r)
}

// The catch-up keeps catch_up_rate: consecutive resume calls are at
// least 1 / rate apart on the clock (here 10/s: 100 ms), however fast the
// calls are answered and although catch_up_concurrency would let three go.
func TestCatchUpKeepsTheRate(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 3, UnreachableThreshold: 1}}}
	clock := &stepClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	const parked = 12
	parkBehindAnOutage(t, store, fake, srv.URL, clock.Advance, parked)
	clock.Advance(time.Hour)

	resumer := &pacedResumer{inner: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, clock: clock}
	opts := catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: resumer, Interval: 20 * time.Millisecond, Claim: 2 * time.Minute, Poll: time.Millisecond}
	// The pace is read off the runner's decisions: when a call is noted
	// in the resumer, other goroutines' waits may already have moved the
	// shared clock on (a wall clock does not jump like that).
	var turnsMu sync.Mutex
	var turns []time.Time
	catchup.OnPaced(&opts, func(dest string, at time.Time) {
		turnsMu.Lock()
		turns = append(turns, at)
		turnsMu.Unlock()
	})
	runner, err := catchup.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- runner.Run(rctx) }()
	var written int
	if !testwait.Poll(testwait.Deadline, func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		written = len(fake.crm)
		return written == parked
	}) {
		t.Fatalf("not caught up: %d of %d written", written, parked)
	}
	cancel()
	<-stopped
	fake.wg.Wait()

	resumer.mu.Lock()
	defer resumer.mu.Unlock()
	if len(resumer.at) != parked {
		t.Fatalf("%d resume calls, want %d", len(resumer.at), parked)
	}
	turnsMu.Lock()
	defer turnsMu.Unlock()
	if len(turns) != len(resumer.at) {
		t.Fatalf("%d resume calls took %d turns: every call must take its turn first", len(resumer.at), len(turns))
	}
	for i := range turns {
		if resumer.at[i].Before(turns[i]) {
			t.Errorf("resume call %d went at %s, before its turn at %s", i+1, resumer.at[i].Format(time.StampMilli), turns[i].Format(time.StampMilli))
		}
	}
	gap := 100 * time.Millisecond
	for i := 1; i < len(turns); i++ {
		if d := turns[i].Sub(turns[i-1]); d < gap {
			t.Errorf("resume call %d came %s after the one before: the rate (10/s) wants at least %s", i+1, d, gap)
		}
	}
}

// turnCounter counts the resume turns held at once across every
// guard's store (turnCounterView): at each turn taken, the turns not
// released whose keys are still resumed (keystore.ResumeInFlight: a slot
// whose execution finished is free before its guard releases it).
type turnCounter struct {
	mu   sync.Mutex
	now  func() time.Time
	held map[string]keystore.Turn // by namespace and key
	max  int
}

// catchUpWithGuards parks n events of crm, then lets the runners of
// `guards` guards on one PostgreSQL (a controlled clock each runner
// moves) catch them up; it returns the turns taken, in order, the most
// turns held at once and the most woken executions in the CRM at once.
func catchUpWithGuards(t *testing.T, guards, n int, dp keystore.DestinationPolicy) (turns []time.Time, maxHeld, maxInCRM int) {
	t.Helper()
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"crm": dp}}
	clock := &stepClock{now: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	url := pgtest.FreshSchema(t, pgtest.URL(t, "one catch-up pace across guards on PostgreSQL"))
	counter := &turnCounter{now: clock.Now, held: map[string]keystore.Turn{}}
	var stores []catchupStore
	for i := 0; i < guards; i++ {
		s, err := postgres.Open(context.Background(), url, postgres.Options{Policies: pol, Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	ctx := context.Background()
	fake, srv := startFakeN8n(t, stores[0])
	defer srv.Close()
	parkBehindAnOutage(t, stores[0], fake, srv.URL, clock.Advance, n)
	clock.Advance(time.Hour)

	var turnsMu sync.Mutex
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, guards)
	for _, s := range stores {
		opts := catchup.Options{Store: &turnCounterView{counter, s}, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
			Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: 20 * time.Millisecond,
			Claim: 2 * time.Minute, Poll: time.Millisecond}
		catchup.OnPaced(&opts, func(_ string, at time.Time) {
			turnsMu.Lock()
			turns = append(turns, at)
			turnsMu.Unlock()
		})
		runner, err := catchup.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		go func() { stopped <- runner.Run(rctx) }()
	}
	var written int
	if !testwait.Poll(time.Minute, func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		written = len(fake.crm)
		return written == n
	}) {
		t.Fatalf("not caught up: %d of %d written", written, n)
	}
	cancel()
	for range stores {
		<-stopped
	}
	fake.wg.Wait()
	for key, writes := range fake.crm {
		if writes != 1 {
			t.Errorf("%s written %d times", key, writes)
		}
	}
	turnsMu.Lock()
	defer turnsMu.Unlock()
	sort.Slice(turns, func(i, j int) bool { return turns[i].Before(turns[j]) })
	counter.mu.Lock()
	defer counter.mu.Unlock()
	return turns, counter.max, int(fake.maxInCRM.Load())
}

// turnCounterView is one guard's store, its turns counted in the shared
// counter.
type turnCounterView struct {
	c *turnCounter
	catchupStore
}

func (v *turnCounterView) TakeResumeTurn(ctx context.Context, req keystore.TurnRequest) (keystore.Turn, bool, time.Duration, error) {
	t, ok, wait, err := v.catchupStore.TakeResumeTurn(ctx, req)
	if !ok {
		return t, ok, wait, err
	}
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	v.c.held[t.Namespace+"/"+t.Key] = t
	inFlight := 0
	for _, h := range v.c.held {
		res, err := v.catchupStore.Lookup(ctx, h.Namespace, h.Key)
		if err != nil || keystore.ResumeInFlight(res.Record, v.c.now()) {
			inFlight++
		}
	}
	v.c.max = max(v.c.max, inFlight)
	return t, ok, wait, err
}

func (v *turnCounterView) ReleaseResumeTurn(ctx context.Context, t keystore.Turn) error {
	v.c.mu.Lock()
	delete(v.c.held, t.Namespace+"/"+t.Key)
	v.c.mu.Unlock()
	return v.catchupStore.ReleaseResumeTurn(ctx, t)
}

// Three guards on one PostgreSQL keep one destination's catch_up_rate
// together: their resume calls' turns are 1 / rate apart on the clock,
// not three calls per gap.
func TestOnePaceAcrossGuards(t *testing.T) {
	turns, _, _ := catchUpWithGuards(t, 3, 12, keystore.DestinationPolicy{Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 3, UnreachableThreshold: 1})
	if len(turns) != 12 {
		t.Fatalf("%d turns for 12 parked events", len(turns))
	}
	for i := 1; i < len(turns); i++ {
		if d := turns[i].Sub(turns[i-1]); d < 100*time.Millisecond {
			t.Errorf("turn %d came %s after the one before: the rate (10/s) wants at least 100ms across the guards", i+1, d)
		}
	}
}

// Three guards on one PostgreSQL keep one destination's
// catch_up_concurrency together: never more than 2 resumed executions in
// flight, although each guard alone would let 2 go.
func TestOneInFlightLimitAcrossGuards(t *testing.T) {
	_, held, inCRM := catchUpWithGuards(t, 3, 12, keystore.DestinationPolicy{Cooldown: time.Hour, CatchUpRate: 1000, CatchUpConcurrency: 2, UnreachableThreshold: 1})
	t.Logf("most turns held at once %d, most woken executions in the CRM at once %d", held, inCRM)
	if held > 2 || inCRM > 2 {
		t.Fatalf("%d turns held, %d executions in the CRM at once: the limit (2) holds for the destination, not per guard", held, inCRM)
	}
}
