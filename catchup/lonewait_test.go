package catchup_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// A destination paused with nothing parked: once its cooldown has passed,
// an event with a resume URL parks (it never probes itself), and the
// catch-up, woken by that commit alone (its interval is an hour), claims it
// as the probe and wakes it; it is written.
func TestAnEventAloneAfterTheCooldownIsTheProbe(t *testing.T) {
	clock := &outageClock{}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: outagePolicies, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	// A write with no resume URL opens the breaker; nothing parks.
	first, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_first", Destination: "crm"})
	if err != nil || first.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("first: %+v %v", first, err)
	}
	if f, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_first", Token: first.Token,
		Reason: keystore.ReasonDestinationUnreachable}); err != nil || f.Outcome != keystore.OutcomeDestinationFailed {
		t.Fatalf("first fail: %+v %v", f, err)
	}
	clock.Advance(time.Hour + time.Second) // the cooldown is over

	newEventCaughtUp(t, store, clock, outagePolicies)
}

// newEventCaughtUp runs a catch-up over store whose interval is an hour
// (commits alone wake it), parks a new event of ns at crm with a resume
// URL, and waits until the fake n8n's execution of it wrote.
func newEventCaughtUp(t *testing.T, store keystore.Store, clock *outageClock, pol keystore.Policies) {
	t.Helper()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	runner, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now,
		Resumer:  &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)},
		Interval: time.Hour, Claim: 5 * time.Second, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- runner.Run(rctx) }()
	defer func() { cancel(); <-stopped; fake.wg.Wait() }()

	fake.mu.Lock()
	fake.keys["1"] = "evt_new"
	fake.mu.Unlock()
	res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_new", Destination: "crm",
		ResumeURL: srv.URL + "/webhook-waiting/1", Fingerprint: "event evt_new"})
	if err != nil || res.Outcome != keystore.OutcomeParked {
		t.Fatalf("the new event after the cooldown: %+v %v, want parked", res, err)
	}
	testwait.Within(t, 20*time.Second, "the new event claimed as the probe, woken and written", func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.crm["evt_new"] == 1
	})
}
