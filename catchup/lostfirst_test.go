package catchup_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// A woken execution that went silent is lost in the caught-up line
// whoever recorded it lost: the guard's watch on the key, or the sweep for
// silent executions that came first (on this guard or another). Before,
// a key the sweep recorded first was counted resumed: the closing line
// of an outage with three silent executions read "2 resumed, 2 lost".
func TestAKeyTheSweepRecordedLostFirstCountsAsLost(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: time.Hour, UnreachableThreshold: 1}}}
	store, clock := parkedOne(t, pol, "evt_silent")
	ctx := context.Background()
	rec, ok, err := store.ClaimResume(ctx, ns, "evt_silent", 2*time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := store.ResumeAnswered(ctx, ns, "evt_silent", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
		t.Fatal(err)
	}
	res, err := store.Lookup(ctx, ns, "evt_silent")
	if err != nil || res.Record == nil || res.Record.ResumeSentAt == nil {
		t.Fatalf("the woken key: %+v %v", res.Record, err)
	}
	woken := res.Record
	r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Logger: slog.New(slog.DiscardHandler), Interval: time.Second, Claim: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The sweep, past the woken bound, records the key lost first.
	clock.Advance(time.Hour)
	if got, err := store.ResumeAnswered(ctx, ns, "evt_silent", *woken.ParkedAt, keystore.ResumeSilent,
		keystore.WokenSilentDetail(woken, 5*time.Minute)); err != nil || got.Reason != keystore.ReasonResumeLost {
		t.Fatalf("the sweep's record: %+v %v", got, err)
	}
	if !catchup.AwaitFinish(r, ctx, woken) {
		t.Fatal("the watch on a key the sweep recorded lost counts it as resumed")
	}
}

// sweepFirst is a store on which the sweep for silent executions records
// a key lost just before the watch's own record of it: between the
// watch's lookup and its record.
type sweepFirst struct{ catchupStore }

func (s sweepFirst) ResumeAnswered(ctx context.Context, ns, key string, parkedAt time.Time, a keystore.ResumeAnswer, detail string) (*keystore.Record, error) {
	if a == keystore.ResumeSilent {
		if _, err := s.catchupStore.ResumeAnswered(ctx, ns, key, parkedAt, a, detail); err != nil { // the sweep's
			return nil, err
		}
	}
	return s.catchupStore.ResumeAnswered(ctx, ns, key, parkedAt, a, detail)
}

// The same when the sweep records the key lost between the watch's
// lookup and its record (seen once in CI: "caught up: 4 resumed, 0
// lost" of an outage whose probe died): the watch's record finds the key
// lost already, and it counts lost all the same.
func TestAKeyTheSweepRecordedLostAsTheWatchLookedCountsAsLost(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: time.Hour, UnreachableThreshold: 1}}}
	store, clock := parkedOne(t, pol, "evt_silent")
	ctx := context.Background()
	rec, ok, err := store.ClaimResume(ctx, ns, "evt_silent", 2*time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	woken, err := store.ResumeAnswered(ctx, ns, "evt_silent", *rec.ParkedAt, keystore.ResumeAccepted, "")
	if err != nil || woken == nil || woken.ResumeSentAt == nil {
		t.Fatalf("the woken key: %+v %v", woken, err)
	}
	r, err := catchup.New(catchup.Options{Store: sweepFirst{store}, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Logger: slog.New(slog.DiscardHandler), Interval: time.Second, Claim: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // past the woken bound
	if !catchup.AwaitFinish(r, ctx, woken) {
		t.Fatal("the watch on a key the sweep recorded lost as it looked counts it as resumed")
	}
}
