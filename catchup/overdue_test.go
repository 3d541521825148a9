package catchup_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// lines keeps the log lines a runner writes, so a test can count them.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.Key + "=" + a.Value.String()); return true })
	l.mu.Lock()
	l.all = append(l.all, b.String())
	l.mu.Unlock()
	return nil
}
func (l *lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lines) WithGroup(string) slog.Handler      { return l }

func (l *lines) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, x := range l.all {
		if strings.Contains(x, s) {
			out = append(out, x)
		}
	}
	return out
}

// Keys parked longer than their namespace's parked_limit are reported
// through the store's event log, once per parked attempt: a second runner
// (another guard, or the same after a restart) reports nothing again, and
// one log line says how many were reported, not one per key.
func TestParkedOverdueReportedOnce(t *testing.T) {
	clock := &outageClock{}
	pol := keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: 30 * 24 * time.Hour, UnreachableThreshold: 1}},
		Namespaces:   map[string]keystore.NamespacePolicy{"short": {ParkedLimit: time.Hour}},
	}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()

	// The CRM is down for a month: both namespaces' writes fail, the
	// breaker opens for every namespace (one namespace's failures alone
	// would pause only its own writes: keystore/breaker_view.go), events
	// park.
	for _, n := range []string{ns, "short"} {
		first, _ := store.Reserve(ctx, keystore.ReserveRequest{Namespace: n, Key: "evt_first", Destination: "crm"})
		if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: n, Key: "evt_first", Token: first.Token,
			Reason: keystore.ReasonDestinationUnreachable}); err != nil {
			t.Fatal(err)
		}
	}
	park := func(namespace, key string) {
		t.Helper()
		res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: namespace, Key: key, Destination: "crm",
			ResumeURL: "http://n8n.local/webhook-waiting/" + fmt.Sprint(len(key))})
		if err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("park %s: %+v %v", key, res, err)
		}
	}
	for i := 0; i < 3; i++ {
		park(ns, fmt.Sprintf("evt_%d", i)) // default limit: 3 days
	}
	park("short", "evt_short") // limit 1 h
	clock.Advance(2 * time.Hour)
	park(ns, "evt_late")

	// run starts a runner (a restart) advance later and stops it three
	// looks of its worker after its report (a second pass would report
	// again), or after its start when none is expected.
	looks := &passes{Store: store}
	run := func(advance time.Duration, report bool) *lines {
		t.Helper()
		clock.Advance(advance)
		logs := &lines{}
		r, err := catchup.New(catchup.Options{Store: looks, Policies: pol, Clock: clock.Now, Logger: slog.New(logs),
			Resumer: &n8n.ResumeCaller{}, Interval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- r.Run(rctx) }()
		if report {
			// The assertions after run say what came instead.
			testwait.Poll(testwait.Deadline, func() bool { return len(logs.matching("parked longer")) > 0 })
		}
		awaitMore(t, "3 looks of the catch-up worker", &looks.parked, 3)
		cancel()
		<-done
		return logs
	}
	overdue := func() []string {
		evs, err := store.Events(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, ev := range evs {
			if ev.Kind == keystore.EventParkedOverdue {
				keys = append(keys, ev.Namespace+"/"+ev.Key)
			}
		}
		return keys
	}

	// After 2 h only the namespace with a 1 h limit is over it.
	logs := run(0, true)
	if got := fmt.Sprint(overdue()); got != "[short/evt_short]" {
		t.Fatalf("overdue after 2 h: %s", got)
	}
	if l := logs.matching("parked longer"); len(l) != 1 || !strings.Contains(l[0], "reported=1") {
		t.Fatalf("log lines %q", l)
	}
	// Three days on, a new runner (a restart): the three old keys, once;
	// the one parked later waits its own three days.
	logs = run(71*time.Hour, true)
	if got := fmt.Sprint(overdue()); got != "[short/evt_short crm-contacts/evt_0 crm-contacts/evt_1 crm-contacts/evt_2]" {
		t.Fatalf("overdue after 3 days: %s", got)
	}
	if l := logs.matching("parked longer"); len(l) != 1 || !strings.Contains(l[0], "reported=3") {
		t.Fatalf("log lines %q", l)
	}
	// Another restart reports nothing again.
	logs = run(time.Minute, false)
	if got := len(overdue()); got != 4 {
		t.Fatalf("%d overdue events after another restart, want 4", got)
	}
	if l := logs.matching("parked longer"); len(l) != 0 {
		t.Fatalf("reported again: %q", l)
	}
	rec, _ := store.Lookup(ctx, ns, "evt_0")
	if h := rec.Record.History; h[len(h)-1].Event != keystore.HistoryParkedOverdue {
		t.Fatalf("history %+v", h)
	}
}
