package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// The destination goes down again while a woken execution of this guard
// has died (n8n took its resume call, then restarted): the event parked by
// the new outage is probed once the cooldown ends, not once the dead
// execution's lease ran out. The dead one is not the probe and cannot
// park again; it holds one slot, not the destination.
func TestAReopenedDestinationIsProbedAfterItsCooldownWhileADeadExecutionWaits(t *testing.T) {
	// The dead execution's watcher moves the step clock a second per
	// millisecond: a day's lease is minutes of a loaded machine, against
	// which an hour's slack for the probe (far more than its cooldown and
	// a few looks) cannot be missed by a slow worker, and a probe held for
	// the lease cannot pass.
	lease, cooldown, slack := 24*time.Hour, time.Minute, time.Hour
	pol := keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: cooldown, CatchUpRate: 100, CatchUpConcurrency: 2, UnreachableThreshold: 1}},
		Namespaces:   map[string]keystore.NamespacePolicy{ns: {Lease: lease}},
	}
	store, clock, fake, srv := outage(t, pol, 2)
	fake.silent["1"] = true // evt_01 wakes and dies
	clock.Advance(time.Hour)
	// The clock moves only while no live execution runs (liveClock): on
	// a loaded machine evt_00's execution would otherwise miss its lease,
	// be recorded lost, and leave evt_01 to be the store's probe.
	live := liveClock{clock, fake}
	calls := &callClock{inner: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, clock: clock, at: map[string]time.Time{}}

	var reparkedAt time.Time
	reopened := false
	runUntil(t, catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: live.Sleep,
		Resumer: calls, Interval: time.Second, Claim: 2 * time.Minute}, fake,
		"the event parked by the second outage written", func() bool {
			if !reopened {
				fake.mu.Lock()
				woken := fake.woken["1"] > 0
				fake.mu.Unlock()
				if !woken {
					return false
				}
				// The CRM is down again: a new event finds it unreachable,
				// opens the breaker and parks.
				ctx := context.Background()
				res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_new", Destination: "crm"})
				if err != nil || res.Outcome != keystore.OutcomeAccepted {
					t.Errorf("new event: %+v %v", res, err)
					return true
				}
				fake.mu.Lock()
				fake.keys["9"] = "evt_new"
				fake.mu.Unlock()
				f, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_new", Token: res.Token,
					Reason: keystore.ReasonDestinationUnreachable, ResumeURL: srv.URL + "/webhook-waiting/9"})
				if err != nil || f.Outcome != keystore.OutcomeParked {
					t.Errorf("new event's fail: %+v %v", f, err)
					return true
				}
				reparkedAt = *f.Record.ParkedAt
				reopened = true
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			return fake.crm["evt_new"] > 0
		}, func() string { return "" })
	if t.Failed() {
		return
	}
	calls.mu.Lock()
	probed, called := calls.at["evt_new"]
	calls.mu.Unlock()
	if !called {
		t.Fatal("evt_new was never called")
	}
	if waited := probed.Sub(reparkedAt); waited > cooldown+slack {
		t.Fatalf("evt_new was probed %s after the destination went down again (cooldown %s): held back by the dead execution's lease (%s)", waited, cooldown, lease)
	}
}
