package catchup_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// A resumed execution's reserve and complete are commits of the store:
// they wake the runner watching the key, which needs no poll to see it
// finish. Here time stands still (every wait of the runner lasts until it
// stops, the fallback interval is an hour): the catch-up still ends with
// the key resumed, within seconds.
func TestAResumedExecutionsCompleteReachesTheRunnerWithoutAPoll(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	store, clock, fake, srv := outage(t, pol, 1)
	clock.Advance(time.Hour) // the cooldown is over; from here the clock does not move

	logs := &lines{}
	stands := func(ctx context.Context, _ time.Duration) { <-ctx.Done() }
	runUntil(t, catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: stands, Logger: slog.New(logs),
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: time.Hour, Claim: 2 * time.Minute},
		fake, "caught up", func() bool { return len(logs.matching("caught up: 1 resumed")) == 1 }, func() string {
			res, _ := store.Lookup(context.Background(), ns, "evt_00")
			return "the key " + string(res.Record.State) + ", written to the CRM: " + map[bool]string{true: "yes", false: "no"}[fake.written() == 1]
		})
	if res, err := store.Lookup(context.Background(), ns, "evt_00"); err != nil || res.Record.State != keystore.StateCompleted {
		t.Fatalf("the resumed key: %+v %v", res.Record, err)
	}
}
