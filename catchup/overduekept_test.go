package catchup_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// overdueCalls counts the store's ParkedOverdue calls.
type overdueCalls struct {
	*bolt.Store
	n atomic.Int32
}

func (s *overdueCalls) ParkedOverdue(ctx context.Context, ns, key string, parkedAt time.Time, limit time.Duration) (bool, error) {
	s.n.Add(1)
	return s.Store.ParkedOverdue(ctx, ns, key, parkedAt, limit)
}

// A worker keeps the overdue parked attempts it handed to the store, so
// that it does not hand them again at every pass; through a long rolling
// outage, in which events park, go overdue and are resolved round after
// round, it keeps those of its last pass alone, not every one it ever
// reported.
func TestTheWorkerKeepsOnlyTheOverdueKeysOfItsLastPass(t *testing.T) {
	pol := keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: 30 * 24 * time.Hour, UnreachableThreshold: 1}},
		Namespaces:   map[string]keystore.NamespacePolicy{ns: {ParkedLimit: time.Hour}},
	}
	bs, clock := openOn(t, pol)
	store := &overdueCalls{Store: bs}
	ctx := context.Background()
	first, _ := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_first", Destination: "crm"})
	if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_first", Token: first.Token,
		Reason: keystore.ReasonDestinationUnreachable}); err != nil {
		t.Fatal(err)
	}
	r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	pass := catchup.OverduePasses(r, "crm")
	const rounds, perRound = 10, 5
	for round := range rounds {
		var keys []string
		for i := range perRound {
			key := fmt.Sprintf("evt_%d_%d", round, i)
			res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm",
				ResumeURL: "http://n8n.local/webhook-waiting/" + key})
			if err != nil || res.Outcome != keystore.OutcomeParked {
				t.Fatalf("park %s: %+v %v", key, res, err)
			}
			keys = append(keys, key)
		}
		clock.Advance(2 * time.Hour)
		calls := store.n.Load()
		if kept := pass(ctx, clock.Now()); kept != perRound {
			t.Fatalf("round %d: the worker keeps %d overdue parked attempts, %d are parked overdue", round, kept, perRound)
		}
		if n := store.n.Load() - calls; n != perRound {
			t.Fatalf("round %d: %d keys handed to the store as overdue, want the %d new ones", round, n, perRound)
		}
		// Its next pass hands none again: they are kept.
		calls = store.n.Load()
		if kept := pass(ctx, clock.Now()); kept != perRound || store.n.Load() != calls {
			t.Fatalf("round %d, second pass: %d kept, %d handed again", round, kept, store.n.Load()-calls)
		}
		for _, key := range keys {
			if _, err := store.Resolve(ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateCompleted,
				By: "ops@example.com", Note: "written by hand", Force: true}); err != nil {
				t.Fatalf("resolve %s: %v", key, err)
			}
		}
	}
	if kept := pass(ctx, clock.Now()); kept != 0 {
		t.Fatalf("the worker keeps %d overdue parked attempts after every one was resolved", kept)
	}
	evs, err := store.Events(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	reported := 0
	for _, ev := range evs {
		if ev.Kind == keystore.EventParkedOverdue {
			reported++
		}
	}
	if reported != rounds*perRound {
		t.Fatalf("%d overdue events, want %d (one per parked attempt)", reported, rounds*perRound)
	}
}
