package catchup_test

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// slidingPolicy: 20 calls a second, and slots enough that the rate is
// what binds (an execution takes 100 ms).
var slidingPolicy = keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
	"crm": {Cooldown: time.Hour, CatchUpRate: 20, CatchUpConcurrency: 8, UnreachableThreshold: 1}}}

// notedResumer notes the clock at each resume call n8n gets.
type notedResumer struct {
	inner catchup.Resumer
	now   func() time.Time
	mu    sync.Mutex
	at    []time.Time
}

func (p *notedResumer) Resume(ctx context.Context, r *keystore.Record) n8n.ResumeOutcome {
	p.mu.Lock()
	p.at = append(p.at, p.now())
	p.mu.Unlock()
	return p.inner.Resume(ctx, r)
}

// catchUpCalls parks n events of crm behind an outage in stores[0], has
// n8n answer each execution's first two resume calls 409 "running
// already" (its answer before the execution reached its Wait node), so
// retries mix with first calls, and lets one runner per store given (the
// same store twice: two runners in one process) catch them up on the
// real time (the stores' clock is it plus the outage's offset): the
// goroutines run as a loaded machine lets them, between a call's turn
// and the call too. It returns the clock's reading at each resume call
// n8n got, and the most woken executions in the CRM at once.
func catchUpCalls(t *testing.T, clock *outageClock, n int, stores ...catchupStore) (calls []time.Time, maxInCRM int) {
	t.Helper()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, stores[0])
	defer srv.Close()
	parkBehindAnOutage(t, stores[0], fake, srv.URL, clock.Advance, n)
	for id := range fake.keys {
		fake.early[id] = 2
	}
	clock.Advance(time.Hour)
	resumer := &notedResumer{inner: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, now: clock.Now}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, len(stores))
	for _, s := range stores {
		runner, err := catchup.New(catchup.Options{Store: s, Policies: slidingPolicy, Clock: clock.Now,
			Resumer: resumer, Interval: 20 * time.Millisecond, Claim: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		go func() { stopped <- runner.Run(rctx) }()
	}
	var written int
	if !testwait.Poll(time.Minute, func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		written = len(fake.crm)
		return written == n
	}) {
		t.Fatalf("not caught up: %d of %d written", written, n)
	}
	cancel()
	for range stores {
		<-stopped
	}
	fake.wg.Wait()
	resumer.mu.Lock()
	defer resumer.mu.Unlock()
	return append([]time.Time(nil), resumer.at...), int(fake.maxInCRM.Load())
}

// checkSlidingSecond fails t when any window of one second holds more
// than rate of calls, as n8n got them.
func checkSlidingSecond(t *testing.T, calls []time.Time, rate int) {
	t.Helper()
	sort.Slice(calls, func(i, j int) bool { return calls[i].Before(calls[j]) })
	for i, j := 0, 0; i < len(calls); i++ {
		for !calls[i].Before(calls[j].Add(time.Second)) {
			j++
		}
		if i-j+1 > rate {
			t.Fatalf("%d resume calls within one second from %s (gaps:%s): catch_up_rate is %d",
				i-j+1, calls[j].Format("15:04:05.000"), gapsOf(calls[j:i+1]), rate)
		}
	}
}

func gapsOf(calls []time.Time) string {
	s := ""
	for i := 1; i < len(calls); i++ {
		s += " " + calls[i].Sub(calls[i-1]).String()
	}
	return s
}

// Two runners in one process on one bbolt store, retries among the
// first calls: no second holds more resume calls than catch_up_rate, as
// n8n gets them (not only as the turns were decided), and no more than
// catch_up_concurrency executions run at once.
func TestTwoRunnersOnOneBoltKeepTheRateInEverySecond(t *testing.T) {
	clock := &outageClock{}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: slidingPolicy, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	calls, inCRM := catchUpCalls(t, clock, 40, store, store)
	if len(calls) < 3*40 {
		t.Fatalf("%d resume calls for 40 events answered twice 409 first", len(calls))
	}
	checkSlidingSecond(t, calls, 20)
	if inCRM > 8 {
		t.Fatalf("%d executions in the CRM at once, the limit is 8", inCRM)
	}
}

// The same with two guards on one PostgreSQL.
func TestTwoGuardsOnOnePostgresKeepTheRateInEverySecond(t *testing.T) {
	clock := &outageClock{}
	url := pgtest.FreshSchema(t, pgtest.URL(t, "the resume rate in every second on PostgreSQL"))
	var stores []catchupStore
	for range 2 {
		s, err := postgres.Open(context.Background(), url, postgres.Options{Policies: slidingPolicy, Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	calls, inCRM := catchUpCalls(t, clock, 40, stores...)
	if len(calls) < 3*40 {
		t.Fatalf("%d resume calls for 40 events answered twice 409 first", len(calls))
	}
	checkSlidingSecond(t, calls, 20)
	if inCRM > 8 {
		t.Fatalf("%d executions in the CRM at once, the limit is 8", inCRM)
	}
}
