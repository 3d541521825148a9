package catchup_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// claimCounter counts the catch-up's claims of parked keys.
type claimCounter struct {
	*bolt.Store
	claims atomic.Int32
}

func (c *claimCounter) ClaimResume(ctx context.Context, ns, key string, claim time.Duration) (*keystore.Record, bool, error) {
	c.claims.Add(1)
	return c.Store.ClaimResume(ctx, ns, key, claim)
}

// While the destination's breaker holds its parked keys (the cooldown), a
// busy store's commits do not make the catch-up list and claim again at
// each one: a refused claim waits for its own resumes or the interval,
// as before the commit signal (each refused claim is a write transaction
// on bbolt; at up to ten commit wakes a second, an outage on a busy guard
// would multiply them).
func TestABusyStoreDoesNotMakeTheCatchUpClaimAtEachCommit(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	store, clock, _, srv := outage(t, pol, 1) // the breaker opens for an hour
	counted := &claimCounter{Store: store}

	r, err := catchup.New(catchup.Options{Store: counted, Policies: pol, Clock: clock.Now, Logger: slog.New(slog.DiscardHandler),
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: time.Hour, Claim: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testwait.For(t, "the catch-up's first claim", func() bool { return counted.claims.Load() > 0 })
	first := counted.claims.Load()
	// Other traffic: 20 commits, each after the signal's cooldown.
	for i := range 20 {
		if _, err := store.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "other", Key: fmt.Sprintf("k%d", i)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * keystore.CommitCooldown)
	}
	if n := counted.claims.Load() - first; n > 1 {
		t.Fatalf("20 commits of other traffic made the catch-up claim %d more times during the cooldown, want at most 1", n)
	}
}
