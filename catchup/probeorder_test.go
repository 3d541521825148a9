package catchup_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// probeRecorder notes which keys became crm's probe, in order, and plays
// the claims' goroutines in the worst order the scheduler may pick: a
// claim made while a probe n8n will not find is out waits until that
// probe's loss is recorded, and the waiting claims then go newest first.
type probeRecorder struct {
	catchupStore
	doomed map[string]bool // the probes whose executions n8n lost
	behind int             // claims that wait behind each doomed probe

	mu     sync.Mutex
	probes []string
	held   []heldClaim   // claims waiting behind a doomed probe, in arrival order
	more   chan struct{} // signalled at each held claim
	stuck  bool          // fewer claims than behind came
}

// heldClaim is one claim waiting: it goes when go_ closes, and closes
// done once it is decided.
type heldClaim struct{ go_, done chan struct{} }

func (p *probeRecorder) probe(ctx context.Context) string {
	brs, err := p.Destinations(ctx)
	if err != nil {
		return ""
	}
	for _, b := range brs {
		if b.Destination == "crm" {
			return b.ProbeKey
		}
	}
	return ""
}

// hold waits while a doomed probe other than key is out; the claim
// closes the returned channel once it is decided.
func (p *probeRecorder) hold(ctx context.Context, key string) chan struct{} {
	done := make(chan struct{})
	if pk := p.probe(ctx); !p.doomed[pk] || pk == key {
		return done
	}
	h := heldClaim{go_: make(chan struct{}), done: done}
	p.mu.Lock()
	p.held = append(p.held, h)
	p.mu.Unlock()
	p.more <- struct{}{}
	<-h.go_
	return done
}

func (p *probeRecorder) claimed(ctx context.Context, key string, ok bool) {
	if !ok || p.probe(ctx) != key {
		return
	}
	p.mu.Lock()
	if len(p.probes) == 0 || p.probes[len(p.probes)-1] != key {
		p.probes = append(p.probes, key)
	}
	p.mu.Unlock()
}

func (p *probeRecorder) ClaimResume(ctx context.Context, ns, key string, claim time.Duration) (*keystore.Record, bool, error) {
	done := p.hold(ctx, key)
	defer close(done)
	r, ok, err := p.catchupStore.ClaimResume(ctx, ns, key, claim)
	p.claimed(ctx, key, ok)
	return r, ok, err
}

func (p *probeRecorder) ClaimResumeBehind(ctx context.Context, ns, key string, claim time.Duration) (*keystore.Record, bool, error) {
	done := p.hold(ctx, key)
	defer close(done)
	r, ok, err := p.catchupStore.ClaimResumeBehind(ctx, ns, key, claim)
	p.claimed(ctx, key, ok)
	return r, ok, err
}

// ResumeAnswered waits, for a doomed probe's loss, until the claims
// behind it are in flight, records the loss (the destination is free),
// then lets them go, newest first. Waiting is bounded (stuck), so a
// worker that launched fewer claims fails the test instead of hanging.
func (p *probeRecorder) ResumeAnswered(ctx context.Context, ns, key string, parkedAt time.Time, a keystore.ResumeAnswer, detail string) (*keystore.Record, error) {
	if !p.doomed[key] || a != keystore.ResumeLost {
		return p.catchupStore.ResumeAnswered(ctx, ns, key, parkedAt, a, detail)
	}
	bound := time.NewTimer(testwait.Deadline)
	defer bound.Stop()
	for range p.behind {
		select {
		case <-p.more:
		case <-bound.C:
			p.mu.Lock()
			p.stuck = true
			p.mu.Unlock()
		}
	}
	r, err := p.catchupStore.ResumeAnswered(ctx, ns, key, parkedAt, a, detail)
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for i := len(held) - 1; i >= 0; i-- {
		close(held[i].go_)
		<-held[i].done
	}
	return r, err
}

// The two oldest parked executions were pruned by n8n: each is the probe
// in turn and lost; the next probe is then the oldest event still
// waiting, evt_02, although claims of younger keys were in flight when
// the lost probes freed the destination (and, as the scheduler may have
// it, came first).
func TestTheProbeIsTheOldestWaitingEventAfterTwoLostProbes(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 100, CatchUpConcurrency: 3, UnreachableThreshold: 1}}}
	store, clock, fake, srv := outage(t, pol, 6)
	fake.deleted["0"], fake.deleted["1"] = true, true
	clock.Advance(time.Hour)
	rec := &probeRecorder{catchupStore: store, doomed: map[string]bool{"evt_00": true, "evt_01": true},
		behind: 2, more: make(chan struct{}, 16)}
	runUntil(t, catchup.Options{Store: rec, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: 20 * time.Millisecond,
		Claim: 2 * time.Minute, Poll: time.Millisecond}, fake,
		"the four live events written", func() bool { return fake.written() == 4 },
		func() string { rec.mu.Lock(); defer rec.mu.Unlock(); return fmt.Sprintf("probes %v", rec.probes) })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.stuck {
		t.Fatalf("fewer than %d claims were in flight behind a lost probe: the test did not play the order it means to (probes %v)", rec.behind, rec.probes)
	}
	if want := []string{"evt_00", "evt_01", "evt_02"}; !slices.Equal(rec.probes, want) {
		t.Fatalf("probes in order %v, want %v: each probe the oldest event still waiting", rec.probes, want)
	}
}
