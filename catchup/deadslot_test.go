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

// callClock notes the runner's clock at each resume call, by key.
type callClock struct {
	inner catchup.Resumer
	clock *stepClock
	mu    sync.Mutex
	at    map[string]time.Time // the first call of each key
}

func (c *callClock) Resume(ctx context.Context, r *keystore.Record) n8n.ResumeOutcome {
	c.mu.Lock()
	if _, ok := c.at[r.Key]; !ok {
		c.at[r.Key] = c.clock.Now()
	}
	c.mu.Unlock()
	return c.inner.Resume(ctx, r)
}

// liveClock is a stepClock that moves only while none of fake's woken
// executions runs: each wait of the runner moves it, but not past a live
// execution that a loaded machine has not run yet (its lease would run
// out on a clock the runner's waits move by a second per millisecond).
// So the clock measures the runner's waits for the dead execution alone.
type liveClock struct {
	*stepClock
	fake *fakeN8n
}

func (c liveClock) Sleep(ctx context.Context, d time.Duration) {
	for c.fake.live.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
	c.stepClock.Sleep(ctx, d)
}

// A woken execution that dies (n8n took the resume call, then restarted)
// frees what it held once the lease it had to reserve in ran out: as the
// probe, its destination; with catch_up_concurrency 1, its slot. The next
// parked event is called within the lease and a few seconds of the dead
// one's waking, not after lease + the 2-minute claim; also on a loaded
// machine, where the live executions run late (liveClock holds the clock
// for them).
func TestADeadWokenExecutionFreesItsSlotWithinTheLease(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dead, next string
	}{
		{name: "the probe dies: its destination is freed", dead: "evt_00", next: "evt_01"},
		{name: "a later one dies: its slot is freed", dead: "evt_01", next: "evt_02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := time.Minute
			pol := keystore.Policies{
				Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: time.Hour, CatchUpRate: 100, CatchUpConcurrency: 1, UnreachableThreshold: 1}},
				Namespaces:   map[string]keystore.NamespacePolicy{ns: {Lease: lease}},
			}
			store, clock, fake, srv := outage(t, pol, 3)
			fake.silent[tc.dead[len("evt_0"):]] = true
			clock.Advance(time.Hour)
			live := liveClock{clock, fake}
			calls := &callClock{inner: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, clock: clock, at: map[string]time.Time{}}
			runUntil(t, catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: live.Sleep,
				Resumer: calls, Interval: time.Second, Claim: 2 * time.Minute}, fake,
				"the two live executions written", func() bool { return fake.written() == 2 },
				func() string { return "" })
			res, err := store.Lookup(context.Background(), ns, tc.dead)
			if err != nil || res.Record.ResumeSentAt == nil {
				t.Fatalf("the dead execution's key: %+v %v", res.Record, err)
			}
			calls.mu.Lock()
			next, called := calls.at[tc.next]
			calls.mu.Unlock()
			if !called {
				t.Fatalf("%s was never called", tc.next)
			}
			if held := next.Sub(*res.Record.ResumeSentAt); held > lease+10*time.Second {
				t.Fatalf("%s was called %s after %s woke and died: held for more than its lease (%s) and a few seconds", tc.next, held, tc.dead, lease)
			}
		})
	}
}
