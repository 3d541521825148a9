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

// Two runners on one bbolt store share one slot: a call that finds it
// held waits for its release, not for a poll. With the look for other
// guards' releases an hour apart, the catch-up still ends at once.
func TestAFreedSlotWakesTheNextCall(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 100, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	clock := &outageClock{}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	const parked = 6
	parkBehindAnOutage(t, store, fake, srv.URL, clock.Advance, parked)
	clock.Advance(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 2)
	for range 2 {
		r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now,
			Resumer:  &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)},
			Interval: 10 * time.Millisecond, Claim: 2 * time.Minute, Poll: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		go func() { stopped <- r.Run(ctx) }()
	}
	testwait.For(t, "every parked event written", func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return len(fake.crm) == parked
	})
	cancel()
	<-stopped
	<-stopped
	fake.wg.Wait()
	if n := fake.maxInCRM.Load(); n > 1 {
		t.Fatalf("%d executions in the CRM at once, the limit is 1", n)
	}
}
