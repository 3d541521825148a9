package catchup_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// slotsHeldElsewhere: every slot is held by other guards until `free`.
type slotsHeldElsewhere struct {
	catchupStore
	clock *stepClock
	free  time.Time
}

func (s *slotsHeldElsewhere) TakeResumeTurn(ctx context.Context, req keystore.TurnRequest) (keystore.Turn, bool, time.Duration, error) {
	if s.clock.Now().Before(s.free) {
		return keystore.Turn{}, false, 0, nil
	}
	return s.catchupStore.TakeResumeTurn(ctx, req)
}

type retryResumer struct {
	clock *stepClock
	store catchupStore
	mu    sync.Mutex
	late  []time.Duration // how long after the claim lapsed each call went
}

func (r *retryResumer) Resume(ctx context.Context, rec *keystore.Record) n8n.ResumeOutcome {
	cur, _ := r.store.Lookup(ctx, rec.Namespace, rec.Key)
	now := r.clock.Now()
	r.mu.Lock()
	if c := cur.Record.ResumeClaimUntil; c == nil || !now.Before(*c) {
		r.late = append(r.late, now.Sub(*rec.ResumeClaimUntil))
	}
	r.mu.Unlock()
	return n8n.ResumeOutcome{Answer: keystore.ResumeRetry, Detail: "n8n 503"}
}

// A key claimed, then waiting for a turn (other guards hold every slot)
// until just before the claim's cut-off, then n8n answers 503 to every
// call: the retries end within the claim, never after it lapsed (when
// another guard may claim the same key and call it too).
func TestResumeCallsStayWithinTheClaim(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Minute, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	bs, clock := parkedOne(t, pol, "evt_00")
	claim := 2 * time.Minute
	store := &slotsHeldElsewhere{catchupStore: bs, clock: clock, free: clock.Now().Add(claim*3/4 - 2*time.Second)}
	rs := &retryResumer{clock: clock, store: bs}
	lapsed := clock.Now().Add(claim + 10*time.Second) // the first claim is over: a call after it would be late
	runTill(t, catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: rs, Interval: 10 * time.Millisecond, Claim: claim, Poll: time.Second},
		"past the first claim on the runner's clock", func() bool { return clock.Now().After(lapsed) })
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.late) > 0 {
		t.Fatalf("%d resume calls went after the key's claim lapsed (up to %s late): another guard may claim and call it meanwhile", len(rs.late), rs.late[len(rs.late)-1])
	}
}
