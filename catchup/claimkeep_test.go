package catchup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// manualClock moves only when the test says (Advance); a Sleep waits
// until the clock passed its end or ctx ends. Unlike stepClock, waiting
// moves nothing: what a test sees between two Advances is what the
// runner did at that instant.
type manualClock struct {
	mu    sync.Mutex
	now   time.Time
	moved chan struct{} // closed at each Advance
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), moved: make(chan struct{})}
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	close(c.moved)
	c.moved = make(chan struct{})
	c.mu.Unlock()
}

func (c *manualClock) Sleep(ctx context.Context, d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		now, moved := c.now, c.moved
		c.mu.Unlock()
		if !now.Before(end) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-moved:
		}
	}
}

// parkedOnBolt opens a bbolt store on clock and parks evt_00 .. evt_<n-1>
// of crm behind an outage (evt_00's fail opens the breaker), a
// millisecond apart, then passes the hour of cooldown.
func parkedOnBolt(t *testing.T, pol keystore.Policies, clock *manualClock, n int) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	first, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_00", Destination: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_00", Token: first.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: "http://n8n.local/webhook-waiting/0"}); err != nil || f.Outcome != keystore.OutcomeParked {
		t.Fatalf("park evt_00: %+v %v", f, err)
	}
	for i := 1; i < n; i++ {
		clock.Advance(time.Millisecond)
		key := fmt.Sprintf("evt_%02d", i)
		if res, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm",
			ResumeURL: fmt.Sprintf("http://n8n.local/webhook-waiting/%d", i)}); err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("park %s: %+v %v", key, res, err)
		}
	}
	clock.Advance(time.Hour)
	return s
}

// startRunner runs a runner with opts until the returned stop is called
// (the test's SIGTERM); stop returns once Run did.
func startRunner(t *testing.T, opts catchup.Options) (stop func()) {
	t.Helper()
	r, err := catchup.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- r.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-stopped }) }
	t.Cleanup(stop)
	return stop
}

func claimOf(t *testing.T, s keystore.Store, key string) *time.Time {
	t.Helper()
	res, err := s.Lookup(context.Background(), ns, key)
	if err != nil || res.Record == nil {
		t.Fatalf("lookup %s: %+v %v", key, res, err)
	}
	return res.Record.ResumeClaimUntil
}

// hangingN8n answers no resume call until released: n8n slow to answer,
// or a guard's call in flight while n8n works. As an HTTP call, one whose
// context ended gets no answer, even one n8n acted on.
type hangingN8n struct {
	called  chan string
	release chan struct{}
}

func (h *hangingN8n) Resume(ctx context.Context, rec *keystore.Record) n8n.ResumeOutcome {
	h.called <- rec.Key
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return n8n.ResumeOutcome{Answer: keystore.ResumeRetry, Detail: "n8n could not be reached: " + err.Error()}
	}
	return n8n.ResumeOutcome{Answer: keystore.ResumeAccepted, Detail: "n8n answered 200"}
}

// A resume call in flight for longer than the claim (n8n slow to
// answer): the claim never lapses under it, nor the probe's hold, so a
// second guard can neither call the same execution nor make another key
// the probe meanwhile.
func TestAClaimIsKeptWhileItsCallIsInFlight(t *testing.T) {
	pol := keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}},
		Namespaces:   map[string]keystore.NamespacePolicy{ns: {Lease: time.Minute}},
	}
	clock := newManualClock()
	store := parkedOnBolt(t, pol, clock, 2)
	n8nSlow := &hangingN8n{called: make(chan string, 4), release: make(chan struct{})}
	claim := 2 * time.Minute
	stop := startRunner(t, catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: n8nSlow, Interval: 5 * time.Millisecond, Claim: claim, Poll: time.Second})
	if key := <-n8nSlow.called; key != "evt_00" {
		t.Fatalf("first call for %s, want the oldest, evt_00", key)
	}
	ctx := context.Background()
	// Past the claim and the probe's hold (claim + lease), an eighth of
	// a claim at a time; after each step the runner has its Interval to
	// look at its clock.
	for step := 1; step <= 24; step++ {
		clock.Advance(claim / 8)
		now := clock.Now()
		if !testwait.Poll(testwait.Deadline, func() bool {
			until := claimOf(t, store, "evt_00")
			return until != nil && until.Sub(now) > claim/4
		}) {
			t.Fatalf("%s after the call started the claim ends at %v (clock %v): it is not kept while the call is in flight", time.Duration(step)*claim/8, claimOf(t, store, "evt_00"), now)
		}
		for _, key := range []string{"evt_00", "evt_01"} {
			if _, ok, err := store.ClaimResume(ctx, ns, key, claim); err != nil || ok {
				t.Fatalf("%s after the call started a second guard claimed %s (%v): the claim or the probe lapsed under a call in flight", time.Duration(step)*claim/8, key, err)
			}
		}
	}
	close(n8nSlow.release)
	testwait.For(t, "the answer recorded", func() bool {
		res, _ := store.Lookup(ctx, ns, "evt_00")
		return res.Record != nil && res.Record.ResumeSentAt != nil
	})
	stop()
}

// slotsHeld: other guards hold every slot of every destination, so a
// claimed key waits for its turn.
type slotsHeld struct{ catchupStore }

func (slotsHeld) TakeResumeTurn(context.Context, keystore.TurnRequest) (keystore.Turn, bool, time.Duration, error) {
	return keystore.Turn{}, false, 0, nil
}

// SIGTERM while a claimed key waits for its turn: the claim, not used,
// is handed back at once; the key waits again and the next guard (or
// this one restarted) claims it at the same instant, as the probe,
// instead of after the claim's lapse.
func TestAStoppedGuardHandsBackTheClaimsItDidNotUse(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 2, UnreachableThreshold: 1}}}
	clock := newManualClock()
	store := parkedOnBolt(t, pol, clock, 2)
	called := make(chan string, 4)
	stop := startRunner(t, catchup.Options{Store: slotsHeld{store}, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: &hangingN8n{called: called, release: make(chan struct{})}, Interval: 5 * time.Millisecond, Claim: 2 * time.Minute, Poll: time.Second})
	testwait.For(t, "the oldest key claimed", func() bool { return claimOf(t, store, "evt_00") != nil })
	stop()
	select {
	case key := <-called:
		t.Fatalf("%s was called although no turn came free", key)
	default:
	}
	res, err := store.Lookup(context.Background(), ns, "evt_00")
	if err != nil {
		t.Fatal(err)
	}
	if p := keystore.PhaseOf(res.Record); p != keystore.PhaseWaiting {
		t.Fatalf("after the stop the claimed key is %s (claim until %v, clock %v), want waiting: its claim was not handed back", p, res.Record.ResumeClaimUntil, clock.Now())
	}
	// The next guard, at the same instant: the oldest key is its probe.
	if _, ok, err := store.ClaimResume(context.Background(), ns, "evt_00", 2*time.Minute); err != nil || !ok {
		t.Fatalf("the next guard could not claim the handed-back key at once: %v %v", ok, err)
	}
	if _, ok, err := store.ClaimResume(context.Background(), ns, "evt_01", 2*time.Minute); err != nil || ok {
		t.Fatalf("a second key was claimed beside the probe: %v %v", ok, err)
	}
}

// SIGTERM while a resume call is in flight: the call runs on, and n8n's
// answer within the grace is recorded as any answer, so the key is
// resumed and no guard calls its execution again; the runner stops once
// the answer is recorded.
func TestAStopLetsACallInFlightFinishWithinItsGrace(t *testing.T) {
	n8nSlow := &hangingN8n{called: make(chan string, 4), release: make(chan struct{})}
	store := stopAsN8nAnswers(t, n8nSlow, n8nSlow.called, n8nSlow.release)
	res, err := store.Lookup(context.Background(), ns, "evt_00")
	if err != nil {
		t.Fatal(err)
	}
	if p := keystore.PhaseOf(res.Record); p != keystore.PhaseResumed || res.Record.ResumeSentAt == nil {
		t.Fatalf("after n8n answered a call in flight at the stop the key is %s, want resumed: n8n's answer was dropped", p)
	}
	if _, ok, err := store.ClaimResume(context.Background(), ns, "evt_00", 2*time.Minute); err != nil || ok {
		t.Fatalf("a second guard claimed the key n8n resumed: %v %v", ok, err)
	}
}

// stopAsN8nAnswers parks one key, runs a runner with an hour's grace
// whose resume call goes to resumer, stops it once the call is made
// (called), then lets the call end (release) and waits for Run to
// return: the stop of a guard whose call n8n answers within the grace.
func stopAsN8nAnswers(t *testing.T, resumer catchup.Resumer, called <-chan string, release chan struct{}) *bolt.Store {
	t.Helper()
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	clock := newManualClock()
	store := parkedOnBolt(t, pol, clock, 1)
	r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: resumer, Interval: 5 * time.Millisecond, Claim: 2 * time.Minute, Poll: time.Second, Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- r.Run(ctx) }()
	<-called
	stop()
	close(release) // n8n's call ends after the stop
	select {
	case <-stopped:
	case <-time.After(testwait.Deadline):
		t.Fatal("the runner did not stop after the call in flight ended")
	}
	return store
}

// SIGTERM while a resume call is in flight that outlives the grace (n8n
// hangs): n8n may have taken it, so the claim is not handed back (nor
// recorded "retry", which drops it): no guard calls the execution again
// before the claim lapses, by when a woken execution has reserved its
// key.
func TestAStopLeavesTheClaimOfACallPastItsGraceToLapse(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	clock := newManualClock()
	store := parkedOnBolt(t, pol, clock, 1)
	n8nSlow := &hangingN8n{called: make(chan string, 4), release: make(chan struct{})}
	stop := startRunner(t, catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: n8nSlow, Interval: 5 * time.Millisecond, Claim: 2 * time.Minute, Poll: time.Second, Grace: time.Millisecond})
	<-n8nSlow.called
	stop()
	res, err := store.Lookup(context.Background(), ns, "evt_00")
	if err != nil {
		t.Fatal(err)
	}
	if p := keystore.PhaseOf(res.Record); p != keystore.PhaseClaimed {
		t.Fatalf("after a stop during its call the key is %s, want claimed until the claim lapses: another guard could call the execution n8n may be waking", p)
	}
	if _, ok, err := store.ClaimResume(context.Background(), ns, "evt_00", 2*time.Minute); err != nil || ok {
		t.Fatalf("a second guard claimed the key whose call was cut off: %v %v", ok, err)
	}
}
