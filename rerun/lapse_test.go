package rerun_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// readOnly is a store that cannot be written for the re-run claims'
// extensions while refusing is set (a full disk, a PostgreSQL failover).
type readOnly struct {
	keystore.Store
	refusing atomic.Bool
	refused  atomic.Int64
}

func (s *readOnly) ExtendRerunClaim(ctx context.Context, ns, key, by string, at time.Time) (time.Time, bool, error) {
	if s.refusing.Load() {
		s.refused.Add(1)
		return time.Time{}, false, errors.New("store read-only")
	}
	return s.Store.ExtendRerunClaim(ctx, ns, key, by, at)
}

// hangingN8n answers a retry only when its ask is cut, and counts the
// asks in flight at once.
type hangingN8n struct {
	mu             sync.Mutex
	asks, inFlight int
	most           int
	asked          chan struct{}
}

func (f *hangingN8n) Retry(ctx context.Context, _, id string, _ []rerun.Key, _ time.Time) (rerun.Retried, error) {
	f.mu.Lock()
	f.asks++
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	first := f.asks == 1
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight--; f.mu.Unlock() }()
	if !first {
		return rerun.Retried{ID: "new-" + id}, nil
	}
	close(f.asked)
	<-ctx.Done() // n8n never answers the first ask
	return rerun.Retried{}, ctx.Err()
}

func (f *hangingN8n) state() (asks, inFlight, most int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asks, f.inFlight, f.most
}

// A retry n8n takes longer than a claim to answer, while the store
// refuses the claim's extensions, is cut before the claim lapses: a
// second guard that claims the grant after the lapse asks n8n while no
// other ask of it is in flight (one grant, one retry at a time; n8n's
// earlier run, RetriedAs, guards the rest).
func TestARetryIsCutBeforeItsUnextendedClaimLapses(t *testing.T) {
	clock := fakeclock.New()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "guard.db"), ctx: context.Background(), clock: clock.Now}
	e.open()
	e.atGate("k1", "41", "crm")
	e.grant("k1")
	store := &readOnly{Store: e.store}
	f := &hangingN8n{asked: make(chan struct{})}
	const claim = time.Minute
	opts := rerun.Options{Name: "guard-a", Clock: clock.Now, Claim: claim, Reads: -1, Pace: time.Millisecond, Interval: time.Hour, Registerer: prometheus.NewRegistry()}
	a, err := rerun.New(store, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rerun.Round(ctx, a); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	<-f.asked
	store.refusing.Store(true)
	claimed := e.last("k1")
	if claimed.Event != keystore.HistoryRerunStarting || claimed.By != "guard-a" {
		t.Fatalf("the key while n8n is asked: %+v, want guard-a's claim", claimed)
	}
	until := clock.Now().Add(claim)
	clock.Advance(claim/2 + time.Second)
	testwait.For(t, "the keeper to try to extend the claim", func() bool { return store.refused.Load() > 0 })
	if _, inFlight, _ := f.state(); inFlight != 1 {
		t.Fatal("the ask was cut at the first refused extension, with half a claim left")
	}
	clock.Set(until.Add(-time.Second)) // the claim has not lapsed yet
	testwait.For(t, "the ask cut before its claim lapses", func() bool { _, inFlight, _ := f.state(); return inFlight == 0 })
	<-done

	clock.Set(until.Add(time.Second)) // the claim lapses
	store.refusing.Store(false)
	opts.Name, opts.Registerer = "guard-b", prometheus.NewRegistry()
	b, err := rerun.New(store, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	rerun.Round(e.ctx, b)
	if asks, _, most := f.state(); asks != 2 || most != 1 {
		t.Fatalf("n8n was asked %d times, at most %d at once; want the second guard's ask after the first was cut", asks, most)
	}
	if l := e.last("k1"); l.Event != keystore.HistoryRerunStarted || l.Detail != "new-41" {
		t.Fatalf("k1: %+v, want the re-run the second guard started", l)
	}
}
