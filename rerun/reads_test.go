package rerun_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// clocked records the runner's time of each ask of n8n's API.
type clocked struct {
	*n8n
	clock *fakeclock.Clock
	mu    sync.Mutex
	at    []time.Time
}

func (c *clocked) Retry(ctx context.Context, workflow, id string, keys []rerun.Key, since time.Time) (rerun.Retried, error) {
	c.mu.Lock()
	c.at = append(c.at, c.clock.Now())
	c.mu.Unlock()
	return c.n8n.Retry(ctx, workflow, id, keys, since)
}

// A caller invents a destination per key (300 once made 15 full-execution
// reads a second of n8n's API, the pace being per destination): however
// many destinations, n8n's API is asked at most Reads times a second, in
// bursts of a second's worth. Counted on the runner's clock, at the fake
// n8n API, in every window of the run.
func TestReRunsAskN8nsAPIAtMostReadsASecondWhateverTheDestinations(t *testing.T) {
	const destinations, reads = 120, 2.0
	e := setup(t)
	for i := range destinations {
		key, exec := fmt.Sprintf("k%03d", i), fmt.Sprint(1000+i)
		e.atGate(key, exec, fmt.Sprintf("invented-%03d", i))
		e.grant(key)
	}
	clock := fakeclock.At(time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC))
	f := &clocked{n8n: newN8n(func(id string) (string, error) { return "new-" + id, nil }), clock: clock}
	r, err := rerun.New(e.store, f, rerun.Options{Reads: reads, Interval: time.Hour, Clock: clock.Now, Sleep: clock.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	wait(t, f.n8n, destinations)

	f.mu.Lock()
	at := append([]time.Time(nil), f.at...)
	f.mu.Unlock()
	if len(at) != destinations {
		t.Fatalf("n8n's API was asked %d times, want %d", len(at), destinations)
	}
	// In any window of w, at most a burst (a second's worth) and w's worth.
	burst := int(reads)
	for _, w := range []time.Duration{time.Second, 10 * time.Second, time.Minute} {
		allowed := burst + int(reads*w.Seconds())
		for i, start := range at {
			n := 0
			for _, t2 := range at[i:] {
				if t2.Sub(start) < w {
					n++
				}
			}
			if n > allowed {
				t.Fatalf("%d asks of n8n's API within %v from %s, want at most %d (%v a second)", n, w, start.Format(time.TimeOnly), allowed, reads)
			}
		}
	}
	if span, least := at[len(at)-1].Sub(at[0]), time.Duration(float64(destinations-burst)/reads*float64(time.Second)); span < least {
		t.Fatalf("%d asks took %v of the runner's clock, want at least %v", destinations, span, least)
	}
}
