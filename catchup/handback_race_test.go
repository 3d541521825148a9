package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// extendAtStop: other guards hold every slot (slotsHeld), and the store
// answers an extension of a claim only once the keeper's context ended:
// the extension committed while the guard was being stopped.
type extendAtStop struct {
	slotsHeld
	extended chan struct{}
}

func (s extendAtStop) ExtendResumeClaim(ctx context.Context, ns, key string, held time.Time, claim time.Duration) (time.Time, bool, error) {
	until, ok, err := s.slotsHeld.catchupStore.ExtendResumeClaim(context.WithoutCancel(ctx), ns, key, held, claim)
	s.extended <- struct{}{}
	<-ctx.Done()
	return until, ok, err
}

// SIGTERM just as an extension of an unused claim commits: the claim
// handed back is the one the store holds now, so the key waits again at
// once. Keeping the claim's old until, the hand-back was refused in
// silence and the key waited for the extended claim to lapse.
func TestAClaimExtendedAsTheGuardStopsIsHandedBack(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 2, UnreachableThreshold: 1}}}
	clock := newManualClock()
	store := parkedOnBolt(t, pol, clock, 1)
	ext := extendAtStop{slotsHeld: slotsHeld{store}, extended: make(chan struct{}, 1)}
	claim := 2 * time.Minute
	stop := startRunner(t, catchup.Options{Store: ext, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: &hangingN8n{called: make(chan string, 4), release: make(chan struct{})}, Interval: 5 * time.Millisecond, Claim: claim, Poll: time.Second})
	testwait.For(t, "the oldest key claimed", func() bool { return claimOf(t, store, "evt_00") != nil })
	first := *claimOf(t, store, "evt_00")
	clock.Advance(claim * 5 / 8) // less than half a claim left: the keeper extends it (the turn is waited for until a quarter is left)
	<-ext.extended
	if until := claimOf(t, store, "evt_00"); until == nil || !until.After(first) {
		t.Fatalf("the claim was not extended: %v (first %v)", until, first)
	}
	stop()
	res, err := store.Lookup(context.Background(), ns, "evt_00")
	if err != nil {
		t.Fatal(err)
	}
	if p := keystore.PhaseOf(res.Record); p != keystore.PhaseWaiting {
		t.Fatalf("after the stop the unused claim is %s until %v (clock %v), want handed back: waiting", p, res.Record.ResumeClaimUntil, clock.Now())
	}
}
