package catchup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/n8n"
)

const ns = "crm-contacts"

// fakeN8n holds parked executions like n8n's Wait node: a resume call
// with the right header wakes one, which reserves its key again, writes to
// the CRM and completes. It misbehaves as n8n does: 409 "is running
// already" while an execution has not reached its Wait node, 404 for an
// execution that was deleted, 403 without the credential.
// startFakeN8n starts a fake n8n over loopback whose executions write
// through store; its resume secret is "s3cret". The caller closes it.
func startFakeN8n(t *testing.T, store keystore.Store) (*fakeN8n, *httptest.Server) {
	fake := &fakeN8n{t: t, store: store, secret: "s3cret", keys: map[string]string{}, early: map[string]int{},
		deleted: map[string]bool{}, silent: map[string]bool{}, woken: map[string]int{}, crm: map[string]int{}}
	return fake, httptest.NewServer(fake)
}

type fakeN8n struct {
	t      *testing.T
	store  keystore.Store
	secret string

	mu       sync.Mutex
	keys     map[string]string // execution id -> key
	early    map[string]int    // execution id -> 409s still to answer
	deleted  map[string]bool
	silent   map[string]bool // execution id -> dies after waking (accepts the resume, never reserves)
	woken    map[string]int  // execution id -> accepted resume calls
	calls    []string        // keys in the order their resume was accepted
	secondAt time.Time       // when the second resume was accepted
	crm      map[string]int  // key -> writes
	inCRM    atomic.Int32    // executions between reserve and complete
	maxInCRM atomic.Int32
	closedAt time.Time // when the first complete closed the breaker
	wg       sync.WaitGroup
	live     atomic.Int32 // woken executions that have not ended
}

func (f *fakeN8n) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(n8n.ResumeDefaultHeader) != f.secret {
		http.Error(w, `{"code":403,"message":"Authorization data is wrong!"}`, http.StatusForbidden)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/webhook-waiting/")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch key, ok := f.keys[id]; {
	case !ok || f.deleted[id]:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"code":404,"message":"The execution \"%s\" does not exist."}`, id)
	case f.early[id] > 0:
		f.early[id]--
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, `{"code":409,"message":"The execution \"%s\" is running already."}`, id)
	case f.woken[id] > 0:
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, `{"code":409,"message":"The execution \"%s\" has finished already."}`, id)
	default:
		var body n8n.ResumeBody
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Key != key {
			f.t.Errorf("resume body %+v (%v), want key %s", body, err, key)
		}
		f.woken[id]++
		f.calls = append(f.calls, key)
		if len(f.calls) == 2 {
			f.secondAt = time.Now()
		}
		if !f.silent[id] {
			f.wg.Add(1)
			f.live.Add(1)
			go f.run(id, key)
		}
		w.Write([]byte(`{"message":"Workflow was started"}`))
	}
}

// run is the woken execution: reserve again (with the event's
// fingerprint, as an approved event must), write, complete.
func (f *fakeN8n) run(id, key string) {
	defer f.wg.Done()
	defer f.live.Add(-1)
	ctx := context.Background()
	res, err := f.store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", ResumeURL: "http://n8n/webhook-waiting/" + id, Fingerprint: "event " + key})
	if err != nil {
		f.t.Errorf("resumed reserve %s: %v", key, err)
		return
	}
	if res.Outcome != keystore.OutcomeAccepted {
		return
	}
	n := f.inCRM.Add(1)
	for m := f.maxInCRM.Load(); n > m && !f.maxInCRM.CompareAndSwap(m, n); m = f.maxInCRM.Load() {
	}
	time.Sleep(100 * time.Millisecond) // the CRM takes a moment
	f.mu.Lock()
	f.crm[key]++
	f.mu.Unlock()
	f.inCRM.Add(-1)
	if _, err := f.store.Complete(ctx, keystore.CompleteRequest{Namespace: ns, Key: key, Token: res.Token, ResultRef: "crm-" + key}); err != nil {
		f.t.Errorf("complete %s: %v", key, err)
	}
	f.mu.Lock()
	if f.closedAt.IsZero() {
		f.closedAt = time.Now()
	}
	f.mu.Unlock()
}

var outagePolicies = keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
	"crm": {Cooldown: time.Hour, CatchUpRate: 50, CatchUpConcurrency: 3, UnreachableThreshold: 1}}}

// outageClock is the real time plus an offset the test moves forward:
// the cooldown ends when the test says, however slow the machine is,
// while the runner's pace runs on real time.
type outageClock struct{ offset atomic.Int64 }

func (c *outageClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *outageClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

func TestCatchUpAfterAnOutage(t *testing.T) {
	clock := &outageClock{}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: outagePolicies, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	catchUpOutage(t, clock, store)
}

// Two guards on one PostgreSQL, each with its runner: every parked
// execution is woken by exactly one of them.
func TestCatchUpTwoGuardsOnePostgres(t *testing.T) {
	url := pgtest.FreshSchema(t, pgtest.URL(t, "the catch-up on PostgreSQL"))
	var stores []catchupStore
	clock := &outageClock{}
	for i := 0; i < 2; i++ {
		s, err := postgres.Open(context.Background(), url, postgres.Options{Policies: outagePolicies, Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	catchUpOutage(t, clock, stores...)
}

type catchupStore interface {
	keystore.Store
	keystore.ParkStore
}

// catchUpOutage: the CRM refuses connections; 20 events (and copies of
// five) are parked; the runners of stores catch them up.
func catchUpOutage(t *testing.T, clock *outageClock, stores ...catchupStore) {
	pol := outagePolicies
	store := stores[0]
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()

	// The CRM refuses connections: the first event opens the breaker.
	first, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_first", Destination: "crm"})
	if err != nil || first.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("first: %+v %v", first, err)
	}
	f, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_first", Token: first.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: srv.URL + "/webhook-waiting/0"})
	if err != nil || f.Outcome != keystore.OutcomeParked {
		t.Fatalf("first fail: %+v %v", f, err)
	}
	fake.keys["0"] = "evt_first"
	// Stores keep parked_at in milliseconds and order a tie by key
	// ("evt_01" < "evt_first"): the first must be older by the clock.
	clock.Advance(2 * time.Millisecond)
	// 20 events during the outage, and copies of five of them.
	for i := 1; i <= 20; i++ {
		id, key := fmt.Sprint(i), fmt.Sprintf("evt_%02d", i)
		fake.keys[id] = key
		copies := 1
		if i%4 == 0 {
			copies = 2
		}
		for c := 0; c < copies; c++ {
			res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", ResumeURL: srv.URL + "/webhook-waiting/" + id})
			if err != nil || res.Outcome != keystore.OutcomeParked {
				t.Fatalf("reserve %s during the outage: %+v %v", key, res, err)
			}
		}
	}
	fake.early["3"] = 2      // woken before it reached its Wait node
	clock.Advance(time.Hour) // the cooldown is over: the CRM is back
	fake.deleted["7"] = true

	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, len(stores))
	logs := &lines{}
	for _, s := range stores {
		runner, err := catchup.New(catchup.Options{Store: s, Policies: pol, Clock: clock.Now, Logger: slog.New(logs),
			Resumer:  &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)},
			Interval: 20 * time.Millisecond, Claim: 5 * time.Second, Poll: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		go func() { stopped <- runner.Run(rctx) }()
	}

	// Until every event is in the CRM or lost. Not a speed target: the
	// limit only turns a catch-up that never ends into a failure.
	if !testwait.Poll(testwait.Deadline, func() bool {
		counts, err := store.ParkedCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fake.mu.Lock()
		written := len(fake.crm)
		fake.mu.Unlock()
		return counts["crm"] == 0 && written == 20 && len(logs.matching("caught up: ")) > 0
	}) {
		fake.mu.Lock()
		t.Fatalf("not caught up after %s: resumed %v, in the CRM %v", testwait.Deadline, fake.calls, fake.crm)
	}
	cancel()
	for range stores {
		<-stopped
	}
	fake.wg.Wait()

	fake.mu.Lock()
	defer fake.mu.Unlock()
	for key, n := range fake.crm {
		if n != 1 {
			t.Errorf("%s written %d times", key, n)
		}
	}
	if _, ok := fake.crm["evt_07"]; ok {
		t.Errorf("the deleted execution wrote")
	}
	// The pace is kept by each guard: with several guards the bound is
	// theirs together (docs/api.md#parking-extension).
	if got, limit := fake.maxInCRM.Load(), int32(3*len(stores)); got > limit {
		t.Errorf("%d resumed executions at the CRM at once, the limit is %d", got, limit)
	}
	// The first resume is the probe: nothing else was woken before it closed the breaker.
	if len(fake.calls) < 2 || fake.calls[0] != "evt_first" {
		t.Fatalf("resume order %v, want the oldest (evt_first) first", fake.calls)
	}
	if !fake.secondAt.After(fake.closedAt) {
		t.Errorf("a second execution was resumed before the probe's complete closed the breaker")
	}
	lost, err := store.Lookup(ctx, ns, "evt_07")
	if err != nil || lost.Record.State != keystore.StateParked || lost.Record.Reason != keystore.ReasonResumeLost {
		t.Fatalf("deleted execution: %+v %v", lost.Record, err)
	}
	for id, n := range fake.woken {
		if n != 1 {
			t.Errorf("execution %s woken %d times", id, n)
		}
	}
	// The log has one line when the destination pauses and one when it is
	// caught up (per guard), not one per event; the lost one is said once.
	paused, caught, lostLines := logs.matching("destination paused"), logs.matching("caught up: "), logs.matching("parked execution lost")
	if len(stores) == 1 && (len(paused) != 1 || !strings.Contains(paused[0], "parked=21") ||
		len(caught) != 1 || !strings.Contains(caught[0], "caught up: 20 resumed, 1 lost (owner told), took ") || !strings.Contains(caught[0], "lost=1")) {
		t.Errorf("log lines: paused %q, caught up %q", paused, caught)
	}
	if len(paused) > len(stores) || len(caught) > len(stores) || len(lostLines) != 1 {
		t.Errorf("log lines: paused %q, caught up %q, lost %q", paused, caught, lostLines)
	}
	if n := len(logs.matching("")); len(stores) == 1 && n > 4 {
		t.Errorf("%d log lines for one outage: %q", n, logs.matching(""))
	}
}

// targetsOf are resume targets allowing the fake n8n at base.
func targetsOf(t *testing.T, base string) keystore.ResumeTargets {
	t.Helper()
	tg, err := keystore.NewResumeTargets([]string{base}, "")
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// openOn opens a bbolt store with pol on a clock the test moves by hand;
// the store closes with the test.
func openOn(t *testing.T, pol keystore.Policies) (*bolt.Store, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store, clock
}

// outage opens a bbolt store with pol on a step clock, starts the fake
// n8n and parks n events of crm behind an outage (parkBehindAnOutage);
// the store and the fake close with the test.
func outage(t *testing.T, pol keystore.Policies, n int) (*bolt.Store, *stepClock, *fakeN8n, *httptest.Server) {
	t.Helper()
	clock := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	fake, srv := startFakeN8n(t, store)
	t.Cleanup(srv.Close)
	parkBehindAnOutage(t, store, fake, srv.URL, clock.Advance, n)
	return store, clock, fake, srv
}

// parkBehindAnOutage parks evt_00 .. evt_<n-1> of crm: evt_00 finds it
// unreachable (its fail, with the resume URL of execution 0, opens the
// breaker and parks it), each later one parks at its reserve a
// millisecond after the one before (advance moves the test's clock).
// fake knows every execution; base is its address. The caller passes the
// cooldown.
func parkBehindAnOutage(t *testing.T, store keystore.Store, fake *fakeN8n, base string, advance func(time.Duration), n int) {
	t.Helper()
	ctx := context.Background()
	first, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_00", Destination: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_00", Token: first.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: base + "/webhook-waiting/0"}); err != nil || f.Outcome != keystore.OutcomeParked {
		t.Fatalf("first fail: %+v %v", f, err)
	}
	fake.keys["0"] = "evt_00"
	for i := 1; i < n; i++ {
		advance(time.Millisecond)
		id, key := fmt.Sprint(i), fmt.Sprintf("evt_%02d", i)
		fake.keys[id] = key
		if res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", ResumeURL: base + "/webhook-waiting/" + id}); err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve %s: %+v %v", key, res, err)
		}
	}
}

// parkedOne opens a bbolt store with pol on a controlled clock and parks
// key of crm behind an outage (its fail opens the breaker), then passes
// an hour (the cooldown). The store closes with the test.
func parkedOne(t *testing.T, pol keystore.Policies, key string) (*bolt.Store, *stepClock) {
	t.Helper()
	clock := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	s, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	res, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: "http://n8n.local/webhook-waiting/0"}); err != nil || f.Outcome != keystore.OutcomeParked {
		t.Fatalf("park %s: %+v %v", key, f, err)
	}
	clock.Advance(time.Hour)
	return s, clock
}

// runUntil runs a runner with opts until done says so (looked at every
// 5 ms, for 30 s of real time at most, then the test fails with what and
// the state status returns), then stops it and waits for fake's
// executions.
func runUntil(t *testing.T, opts catchup.Options, fake *fakeN8n, what string, done func() bool, status func() string) {
	t.Helper()
	r, err := catchup.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- r.Run(ctx) }()
	defer func() { cancel(); <-stopped; fake.wg.Wait() }()
	if !testwait.Poll(testwait.Deadline, done) {
		t.Fatalf("not %s within %s: %s", what, testwait.Deadline, status())
	}
}

// written is how many keys the fake CRM has been written for.
func (f *fakeN8n) written() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.crm)
}
