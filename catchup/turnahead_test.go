package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// turnAhead gives every resume turn an hour ahead (TurnRequest.Ahead, as
// bbolt gives one a few milliseconds ahead): the call waits for it on
// the runner's clock, which the test does not move.
type turnAhead struct {
	catchupStore
	taken chan struct{}
}

func (s turnAhead) TakeResumeTurn(ctx context.Context, req keystore.TurnRequest) (keystore.Turn, bool, time.Duration, error) {
	t, ok, wait, err := s.catchupStore.TakeResumeTurn(ctx, req)
	if ok {
		t.At = t.At.Add(time.Hour)
		s.taken <- struct{}{}
	}
	return t, ok, wait, err
}

// SIGTERM while a probe waits for the turn it was given ahead: no call
// was made, so its claim is handed back, and the probe with it. A claim
// dropped by recording "retry" kept the breaker's probe hold, and no
// other event could probe until it ended (a person's resolve of the key
// meanwhile, say, left the destination without a probe for the hold).
func TestAStopBeforeTheFirstCallHandsBackTheClaimAndTheProbe(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	clock := newManualClock()
	store := parkedOnBolt(t, pol, clock, 1)
	n8nSlow := &hangingN8n{called: make(chan string, 4), release: make(chan struct{})}
	ahead := turnAhead{catchupStore: store, taken: make(chan struct{}, 4)}
	stop := startRunner(t, catchup.Options{Store: ahead, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: n8nSlow, Interval: 5 * time.Millisecond, Claim: 2 * time.Minute, Poll: time.Second})
	<-ahead.taken
	stop()
	if len(n8nSlow.called) != 0 {
		t.Fatal("n8n was called although the stop came before the call's turn")
	}
	brs, err := store.Destinations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range brs {
		if b.Destination == "crm" && (b.ProbeKey != "" || b.ProbeUntil != nil) {
			t.Fatalf("after the stop the breaker still holds the probe %s/%s until %v: no other event may probe until then", b.ProbeNamespace, b.ProbeKey, b.ProbeUntil)
		}
	}
	if _, ok, err := store.ClaimResume(context.Background(), ns, "evt_00", 2*time.Minute); err != nil || !ok {
		t.Fatalf("the next guard could not claim the key no call was made for (ok=%v err=%v): it waits for a lapse", ok, err)
	}
}
