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

type releaseWatch struct {
	catchupStore
	clock *stepClock
	mu    sync.Mutex
	late  []time.Duration
	n     int // turns released
}

func (w *releaseWatch) ReleaseResumeTurn(ctx context.Context, t keystore.Turn) error {
	w.mu.Lock()
	w.n++
	if d := w.clock.Now().Sub(t.Until); d > 0 {
		w.late = append(w.late, d)
	}
	w.mu.Unlock()
	return w.catchupStore.ReleaseResumeTurn(ctx, t)
}

type slowAccept struct {
	clock *stepClock
	n     int
}

func (s *slowAccept) Resume(ctx context.Context, rec *keystore.Record) n8n.ResumeOutcome {
	s.n++
	if s.n < 6 { // n8n still starting: 503 for a while, then it takes the call
		return n8n.ResumeOutcome{Answer: keystore.ResumeRetry, Detail: "503"}
	}
	return n8n.ResumeOutcome{Answer: keystore.ResumeAccepted}
}

// A turn's slot is held as long as the runner counts its call in flight
// (retries within the claim, then the woken bound, a lease, from acceptance): it is
// released before its hold ends, so no other guard takes the slot while
// the execution is still in flight.
func TestASlotIsHeldWhileItsCallIsInFlight(t *testing.T) {
	pol := keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: time.Minute, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}},
		Namespaces:   map[string]keystore.NamespacePolicy{ns: {Lease: time.Minute}},
	}
	bs, clock := parkedOne(t, pol, "k")
	w := &releaseWatch{catchupStore: bs, clock: clock}
	bound := time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC) // accepted after 10:00, the lease (1 min) after it
	runTill(t, catchup.Options{Store: w, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: &slowAccept{clock: clock}, Interval: time.Second, Claim: 2 * time.Minute},
		"at the woken bound with a turn released", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.n > 0 && !clock.Now().Before(bound)
		})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 || clock.Now().Before(bound) {
		t.Fatalf("the runner did not reach the woken bound (%d turns released, clock at %s): nothing was tested", w.n, clock.Now())
	}
	if len(w.late) > 0 {
		t.Fatalf("a turn was released %s after its slot's hold ended: the slot was free for other guards while this execution was in flight", w.late[0])
	}
}
