package catchup_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/prometheus/client_golang/prometheus"
)

// lostEvents are the store's parked_lost events (each becomes a Slack
// message to the key's owner), as namespace/key.
func lostEvents(t *testing.T, store keystore.Store) []string {
	t.Helper()
	evs, err := store.Events(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, ev := range evs {
		if ev.Kind == keystore.EventParkedLost {
			keys = append(keys, ev.Namespace+"/"+ev.Key)
		}
	}
	return keys
}

// A woken execution that dies (n8n accepted the resume call, then n8n
// restarted) never reserves its key again. The runner watching it records
// the key lost once the bound (a lease from waking) has passed: parked,
// resume_lost, its owner told once, never woken again; it was the
// breaker's probe, so the destination is freed and the rest catch up.
func TestAWokenExecutionThatDiesIsReported(t *testing.T) {
	pol := keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: time.Hour, CatchUpRate: 100, CatchUpConcurrency: 2, UnreachableThreshold: 1}},
		Namespaces:   map[string]keystore.NamespacePolicy{ns: {Lease: time.Minute}},
	}
	ctx := context.Background()
	store, clock, fake, srv := outage(t, pol, 4)
	fake.silent["0"] = true // the oldest: the probe, and it dies
	clock.Advance(time.Hour)
	logs := &lines{}
	runner, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep, Logger: slog.New(logs),
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: time.Second,
		Claim: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- runner.Run(rctx) }()
	var written int
	if !testwait.Poll(testwait.Deadline, func() bool {
		fake.mu.Lock()
		written = len(fake.crm)
		fake.mu.Unlock()
		return written == 3 && len(lostEvents(t, store)) == 1 && len(logs.matching("caught up: ")) == 1
	}) {
		res, _ := store.Lookup(ctx, ns, "evt_00")
		t.Fatalf("%d of 3 written, lost events %v, the silent key %+v", written, lostEvents(t, store), res.Record)
	}
	cancel()
	<-stopped
	fake.wg.Wait()

	res, err := store.Lookup(ctx, ns, "evt_00")
	if err != nil {
		t.Fatal(err)
	}
	rec := res.Record
	if rec.State != keystore.StateParked || rec.Reason != keystore.ReasonResumeLost || !strings.Contains(rec.Message, "did not reserve the key again within 1m0s") {
		t.Fatalf("the silent key: %s %s %q", rec.State, rec.Reason, rec.Message)
	}
	if h := rec.History; len(h) < 2 || h[len(h)-2].Event != keystore.HistoryResumed || h[len(h)-1].Event != keystore.HistoryResumeLost {
		t.Fatalf("history %+v", h)
	}
	if woken := rec.ResumeSentAt; woken == nil || rec.UpdatedAt.Sub(*woken) < time.Minute {
		t.Fatalf("recorded lost %v after waking, before the bound (the lease, 1m)", rec.UpdatedAt.Sub(*woken))
	}
	if l := logs.matching("woken execution went silent"); len(l) != 1 || !strings.Contains(l[0], "key=evt_00") {
		t.Fatalf("log lines %q", l)
	}
	// The closing line counts the silent one lost, not resumed.
	if l := logs.matching("caught up: "); len(l) != 1 || !strings.Contains(l[0], "caught up: 3 resumed, 1 lost (owner told)") {
		t.Fatalf("closing line %q, want 3 resumed, 1 lost", l)
	}
	fake.mu.Lock()
	calls := fake.woken["0"]
	fake.mu.Unlock()
	if calls != 1 {
		t.Fatalf("the silent execution was woken %d times: a woken execution is never called again", calls)
	}
}

// The watch ends with the guard that woke the execution; the sweep does
// not: after a restart a new runner finds the key woken longer than the
// bound ago and reports it, once however often it runs; a key woken more
// recently is left to its execution.
func TestASilentWokenExecutionIsFoundAfterARestart(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) {
		silentAfterRestart(t, func(pol keystore.Policies, clock keystore.Clock) catchupStore {
			s, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.FreshSchema(t, pgtest.URL(t, "the silent-woken sweep on PostgreSQL"))
		silentAfterRestart(t, func(pol keystore.Policies, clock keystore.Clock) catchupStore {
			s, err := postgres.Open(context.Background(), url, postgres.Options{Policies: pol, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func silentAfterRestart(t *testing.T, open func(keystore.Policies, keystore.Clock) catchupStore) {
	pol := keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{
			"crm":    {Cooldown: time.Hour, UnreachableThreshold: 1},
			"mailer": {Cooldown: time.Hour, UnreachableThreshold: 1},
		},
		Namespaces: map[string]keystore.NamespacePolicy{ns: {Lease: time.Minute}},
	}
	clock := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	store := open(pol, clock.Now)
	defer store.Close()
	ctx := context.Background()
	// Two keys parked by a guard whose runner woke them and then stopped
	// (each the probe of its destination's breaker).
	wake := func(key, dest string) {
		t.Helper()
		res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: dest})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token,
			Reason: keystore.ReasonDestinationUnreachable, ResumeURL: "http://n8n.local/webhook-waiting/" + key}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		claimed, ok, err := store.ClaimResume(ctx, ns, key, 2*time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", key, ok, err)
		}
		if _, err := store.ResumeAnswered(ctx, ns, key, *claimed.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
	}
	wake("evt_old", "crm")
	clock.Advance(2 * time.Minute)
	wake("evt_new", "mailer") // woken 2 min after evt_old (and its hour of cooldown), 30 s before the restart's sweep
	clock.Advance(30 * time.Second)

	// The clock moves only when the test says: a runner's waits pass real
	// time alone, so no sweep but the one at start can find a key past its
	// bound, however long a loaded machine takes to get there.
	still := func(ctx context.Context, _ time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
	var reg *prometheus.Registry
	// run starts a runner (a restarted guard) and stops it once its sweep
	// at start shows: lost names want, and the woken gauge reads woken
	// (the store's count, taken after the sweep).
	run := func(want, woken string) *lines {
		t.Helper()
		logs := &lines{}
		reg = prometheus.NewRegistry()
		r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: still, Logger: slog.New(logs),
			Resumer: &n8n.ResumeCaller{}, Interval: 10 * time.Millisecond, Claim: 2 * time.Minute, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- r.Run(rctx) }()
		defer func() { cancel(); <-done }()
		// Not a speed target: the limit only turns a sweep that never
		// comes into a failure.
		var lost, gauged string
		if !testwait.Poll(testwait.Deadline, func() bool {
			lost, gauged = fmt.Sprint(lostEvents(t, store)), gauge(t, reg, "n8n_guard_parked_woken")
			return lost == want && gauged == woken
		}) {
			t.Fatalf("after the restart: lost %s, want %s; n8n_guard_parked_woken %s, want %s", lost, want, gauged, woken)
		}
		return logs
	}
	// evt_old is past its bound, evt_new within it: it is counted woken,
	// waiting for its execution.
	logs := run("[crm-contacts/evt_old]", "crm=0 mailer=1")
	if l := logs.matching("woken execution went silent"); len(l) != 1 {
		t.Fatalf("log lines %q", l)
	}
	res, _ := store.Lookup(ctx, ns, "evt_new")
	if res.Record.Reason == keystore.ReasonResumeLost {
		t.Fatal("a key woken within the bound was recorded lost")
	}
	// Another restart, past evt_new's bound: evt_new now, evt_old not again.
	clock.Advance(2 * time.Minute)
	run("[crm-contacts/evt_old crm-contacts/evt_new]", "crm=0 mailer=0")
}

// gauge reads a gauge vector by destination, as "dest=value ..." sorted.
func gauge(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "destination" {
					out = append(out, fmt.Sprintf("%s=%g", l.GetValue(), m.GetGauge().GetValue()))
				}
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
