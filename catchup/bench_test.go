package catchup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// instantN8n wakes an execution at once, in process: its reserve and
// complete are the only work, so the runner's pace is what is measured.
type instantN8n struct {
	store    keystore.Store
	inFlight atomic.Int32
	max      atomic.Int32
	wg       sync.WaitGroup
}

func (f *instantN8n) Resume(_ context.Context, r *keystore.Record) n8n.ResumeOutcome {
	n := f.inFlight.Add(1)
	for m := f.max.Load(); n > m && !f.max.CompareAndSwap(m, n); m = f.max.Load() {
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer f.inFlight.Add(-1)
		ctx := context.Background()
		res, err := f.store.Reserve(ctx, keystore.ReserveRequest{Namespace: r.Namespace, Key: r.Key, Destination: r.Destination, ResumeURL: r.ResumeURL})
		if err != nil || res.Outcome != keystore.OutcomeAccepted {
			panic(fmt.Sprintf("resumed reserve %s: %v %v", r.Key, res.Outcome, err))
		}
		time.Sleep(time.Millisecond) // the destination's write
		if _, err := f.store.Complete(ctx, keystore.CompleteRequest{Namespace: r.Namespace, Key: r.Key, Token: res.Token}); err != nil {
			panic(err)
		}
	}()
	return n8n.ResumeOutcome{Answer: keystore.ResumeAccepted, Status: 200}
}

// BenchmarkCatchUp10k: 10,000 parked keys of one destination caught up
// at catch_up_rate 250/s with catch_up_concurrency 32. Reports the
// resumes per second reached and the most resumed executions in flight.
func BenchmarkCatchUp10k(b *testing.B) {
	const n, rate, conc = 10000, 250.0, 32
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: rate, CatchUpConcurrency: conc, UnreachableThreshold: 1}}}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		store, err := bolt.Open(filepath.Join(b.TempDir(), "guard.db"), bolt.Options{Policies: pol})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		first, _ := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_first", Destination: "crm"})
		store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_first", Token: first.Token, Reason: keystore.ReasonDestinationUnreachable})
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := w; k < n; k += 8 {
					res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: fmt.Sprintf("evt_%05d", k), Destination: "crm", ResumeURL: fmt.Sprintf("http://n8n/webhook-waiting/%d", k)})
					if err != nil || res.Outcome != keystore.OutcomeParked {
						panic(fmt.Sprint(res.Outcome, err))
					}
				}
			}()
		}
		wg.Wait()
		if _, err := store.ResetBreaker(ctx, "crm", "bench", "bench"); err != nil {
			b.Fatal(err)
		}
		fake := &instantN8n{store: store}
		runner, err := catchup.New(catchup.Options{Store: store, Resumer: fake, Policies: pol, Interval: 10 * time.Millisecond, Poll: 20 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		b.StartTimer()
		start := time.Now()
		go func() { stopped <- runner.Run(rctx) }()
		for {
			c, err := store.Counts(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if c[ns][keystore.StateCompleted] == n {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(start)
		b.StopTimer()
		cancel()
		<-stopped
		fake.wg.Wait()
		store.Close()
		b.ReportMetric(float64(n)/took.Seconds(), "resumes/s")
		b.ReportMetric(float64(fake.max.Load()), "max-in-flight")
		if fake.max.Load() > conc {
			b.Fatalf("%d in flight, the limit is %d", fake.max.Load(), conc)
		}
	}
}

// BenchmarkCatchUpGuardsPostgres: 500 keys of one destination parked on
// PostgreSQL, caught up by 1, 2 and 3 guards (a runner and a store
// connection each) at catch_up_rate 50/s and catch_up_concurrency 8 for
// the destination. Reports the combined resumes per second (from the
// first resume call to the last) and the most resumed executions in
// flight across the guards: the pace is the destination's, not each
// guard's.
func BenchmarkCatchUpGuardsPostgres(b *testing.B) {
	const n, rate, conc = 500, 50.0, 8
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: rate, CatchUpConcurrency: conc, UnreachableThreshold: 1}}}
	base := pgtest.URL(b, "the catch-up benchmark across guards")
	for _, guards := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("guards=%d", guards), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				url := pgtest.FreshSchema(b, base)
				var stores []*postgres.Store
				for g := 0; g < guards; g++ {
					s, err := postgres.Open(context.Background(), url, postgres.Options{Policies: pol})
					if err != nil {
						b.Fatal(err)
					}
					stores = append(stores, s)
				}
				ctx := context.Background()
				store := stores[0]
				first, _ := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_first", Destination: "crm"})
				store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_first", Token: first.Token, Reason: keystore.ReasonDestinationUnreachable})
				for k := 0; k < n; k++ {
					res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: fmt.Sprintf("evt_%05d", k), Destination: "crm", ResumeURL: fmt.Sprintf("http://n8n/webhook-waiting/%d", k)})
					if err != nil || res.Outcome != keystore.OutcomeParked {
						b.Fatal(res.Outcome, err)
					}
				}
				if _, err := store.ResetBreaker(ctx, "crm", "bench", "bench"); err != nil {
					b.Fatal(err)
				}
				fake := &instantN8n{store: store}
				calls := &callTimes{inner: fake}
				rctx, cancel := context.WithCancel(ctx)
				stopped := make(chan error, guards)
				b.StartTimer()
				for _, s := range stores {
					runner, err := catchup.New(catchup.Options{Store: s, Resumer: calls, Policies: pol, Interval: 10 * time.Millisecond, Poll: 20 * time.Millisecond})
					if err != nil {
						b.Fatal(err)
					}
					go func() { stopped <- runner.Run(rctx) }()
				}
				for {
					c, err := store.Counts(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if c[ns][keystore.StateCompleted] == n {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				b.StopTimer()
				cancel()
				for range stores {
					<-stopped
				}
				fake.wg.Wait()
				for _, s := range stores {
					s.Close()
				}
				span, worst := calls.spread()
				b.ReportMetric(float64(n-1)/span.Seconds(), "resumes/s")
				b.ReportMetric(float64(worst), "most-in-1s")
				b.ReportMetric(float64(fake.max.Load()), "max-in-flight")
				if fake.max.Load() > conc {
					b.Fatalf("%d in flight across %d guards, the limit is %d", fake.max.Load(), guards, conc)
				}
			}
		})
	}
}

// callTimes notes when each resume call went.
type callTimes struct {
	inner catchup.Resumer
	mu    sync.Mutex
	at    []time.Time
}

func (c *callTimes) Resume(ctx context.Context, r *keystore.Record) n8n.ResumeOutcome {
	c.mu.Lock()
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	return c.inner.Resume(ctx, r)
}

// spread is the time from the first call to the last and the most calls
// in any one-second window.
func (c *callTimes) spread() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sort.Slice(c.at, func(i, j int) bool { return c.at[i].Before(c.at[j]) })
	worst, j := 0, 0
	for i := range c.at {
		for c.at[i].Sub(c.at[j]) >= time.Second {
			j++
		}
		worst = max(worst, i-j+1)
	}
	return c.at[len(c.at)-1].Sub(c.at[0]), worst
}
