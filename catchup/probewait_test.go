package catchup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// stillDown is the store as the fake n8n's executions see it while the
// CRM is still down for the first woken execution of key: its reserve is
// accepted (it is the probe), its write finds the CRM unreachable, and
// its fail parks it again with the resume URL of its Wait node, where
// the execution waits again (n8n may wake it once more). The breaker's
// next cooldown then passes on clock (the catch-up waits for it on real
// time, at its Interval).
type stillDown struct {
	keystore.Store
	fake    *fakeN8n
	clock   *stepClock
	key, id string
	base    string

	mu      sync.Mutex
	reparks int
	since   time.Time // the re-parked key's wait start
}

func (s *stillDown) Reserve(ctx context.Context, req keystore.ReserveRequest) (keystore.Result, error) {
	res, err := s.Store.Reserve(ctx, req)
	if err != nil || res.Outcome != keystore.OutcomeAccepted || req.Key != s.key {
		return res, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reparks > 0 {
		return res, nil
	}
	s.reparks++
	f, err := s.Store.Fail(ctx, keystore.FailRequest{Namespace: req.Namespace, Key: req.Key, Token: res.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: s.base + "/webhook-waiting/" + s.id})
	if err != nil || f.Outcome != keystore.OutcomeParked {
		return f, fmt.Errorf("the write of %s found the CRM down, its fail: %+v %v", req.Key, f, err)
	}
	if w := f.Record.WaitingSince(); w != nil {
		s.since = *w
	}
	s.fake.mu.Lock()
	delete(s.fake.woken, s.id) // back at its Wait node
	s.fake.mu.Unlock()
	// The next cooldown passes; the execution, parked, writes nothing.
	s.clock.Advance(time.Hour)
	return f, nil
}

// The first probe, evt_00, is woken and its write finds the CRM still
// down: it parks again, its parked_at now and its wait (parked_since)
// kept. After the next cooldown the probe is evt_00 again, the event
// that has waited longest, not evt_01, which parked after it.
func TestTheProbeIsTheOldestWaitingEventAfterItParksAgain(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 100, CatchUpConcurrency: 3, UnreachableThreshold: 1}}}
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := &stepClock{now: start}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	down := &stillDown{Store: store, clock: clock, key: "evt_00", id: "0"}
	fake, srv := startFakeN8n(t, down)
	defer srv.Close()
	down.fake, down.base = fake, srv.URL
	parkBehindAnOutage(t, store, fake, srv.URL, clock.Advance, 3)
	clock.Advance(time.Hour)
	runUntil(t, catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: 20 * time.Millisecond,
		Claim: 2 * time.Minute, Poll: time.Millisecond}, fake,
		"the three events written", func() bool { return fake.written() == 3 },
		func() string { fake.mu.Lock(); defer fake.mu.Unlock(); return fmt.Sprintf("resumed %v", fake.calls) })
	down.mu.Lock()
	defer down.mu.Unlock()
	if down.reparks != 1 || !down.since.Equal(start) {
		t.Fatalf("evt_00 parked again %d times (want 1), waiting since %v (want its first parking, %v): the test did not play the outage it means to",
			down.reparks, down.since, start)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	// Nothing but the probe is resumed while the breaker is not closed:
	// the first two resumes are the two probes.
	if len(fake.calls) < 2 || !slices.Equal(fake.calls[:2], []string{"evt_00", "evt_00"}) {
		t.Fatalf("resumed in order %v, want evt_00 twice first: after its re-park it is still the oldest waiting event", fake.calls)
	}
}
