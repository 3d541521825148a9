package n8n

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// retryingN8n is a stand-in n8n that keeps its executions: a retry makes
// a new execution (retryOf the one retried, startedAt its clock, still
// running), and the list of a workflow's executions says so, newest first,
// two a page, running ones only when asked for, as n8n's public API does. dropFirst cuts the first retry's answer off after
// n8n started it, as a guard SIGKILLed while n8n answers sees it.
type retryingN8n struct {
	mu        sync.Mutex
	now       func() time.Time
	retries   []string // the executions n8n was asked to retry
	execs     []map[string]any
	dropFirst bool
}

func (n *retryingN8n) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch path := r.URL.Path; {
	case r.Method == http.MethodGet && path == "/api/v1/executions/42":
		fmt.Fprint(w, execution("42", "error", "wf1", gate, "crm", "lead-1"))
	case r.Method == http.MethodPost && path == "/api/v1/executions/42/retry":
		n.retries = append(n.retries, "42")
		id := fmt.Sprint(100 + len(n.execs))
		n.execs = append(n.execs, map[string]any{"id": id, "workflowId": "wf1", "retryOf": "42", "mode": "retry",
			"status": "running", "startedAt": n.now().UTC().Format(time.RFC3339Nano)})
		if n.dropFirst && len(n.retries) == 1 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // n8n started it; its answer never arrives
			return
		}
		fmt.Fprintf(w, `{"id":%q,"mode":"retry","status":"running"}`, id)
	case r.Method == http.MethodGet && path == "/api/v1/executions" && r.URL.Query().Get("workflowId") == "wf1":
		// Newest first; older executions of the workflow after them. As
		// n8n does, the default list leaves out the executions running
		// now; status=running lists only them.
		running := r.URL.Query().Get("status") == "running"
		all := []map[string]any{}
		for i := len(n.execs) - 1; i >= 0; i-- {
			if (n.execs[i]["status"] == "running") == running {
				all = append(all, n.execs[i])
			}
		}
		if running {
			writeJSON(w, map[string]any{"data": all, "nextCursor": nil})
			return
		}
		for i := 41; i >= 30; i-- {
			all = append(all, map[string]any{"id": fmt.Sprint(i), "workflowId": "wf1", "retryOf": nil, "status": "error"})
		}
		from := 0
		fmt.Sscan(r.URL.Query().Get("cursor"), &from)
		to := min(from+2, len(all))
		next := any(nil)
		if to < len(all) {
			next = fmt.Sprint(to)
		}
		writeJSON(w, map[string]any{"data": all[from:to], "nextCursor": next})
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"not found"}`)
	}
}

func (n *retryingN8n) asked() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.retries...)
}

// One grant is one retry in n8n, also when the guard that asked stopped
// after n8n started the retry and before it noted n8n's answer: the claim
// goes stale, a guard takes it again, finds n8n's retry of the execution
// since the grant, and notes it instead of asking n8n a second time. A
// retry from before the grant (a person's own, which met the gate) does
// not count: that grant is asked.
func TestOneGrantIsOneRetryThroughAGuardThatStoppedWhileN8nAnswered(t *testing.T) {
	clock := fakeclock.At(time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC))
	fake := &retryingN8n{now: clock.Now, dropFirst: true}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("n8n was asked to retry %v", fake.asked())
		}
	})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "guard.db")
	ctx := context.Background()
	open := func() *bolt.Store {
		s, err := bolt.Open(path, bolt.Options{Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// A person's own Retry in n8n, before anyone allowed it: it met the
	// gate and is not the grant's re-run.
	fake.execs = append(fake.execs, map[string]any{"id": "99", "workflowId": "wf1", "retryOf": "42", "status": "error",
		"startedAt": clock.Now().Add(-time.Hour).Format(time.RFC3339Nano)})

	store := open()
	owner := "n8n wf1 exec 42"
	r, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "lead-1", Owner: owner, Destination: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: "crm", Key: "lead-1", Token: r.Token, Reason: keystore.ReasonDestinationFailed}); err != nil {
		t.Fatal(err)
	}
	if g, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "lead-1", Owner: owner, Destination: "crm", Rerun: true}); err != nil || g.Outcome != keystore.OutcomeRerunNotGranted {
		t.Fatalf("the gate: %+v %v", g.Outcome, err)
	}
	clock.Advance(time.Second)
	if _, err := store.Resolve(ctx, keystore.ResolveRequest{Namespace: "crm", Key: "lead-1", Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "CRM back"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)

	runner := func(store *bolt.Store) (*rerun.Runner, *prometheus.Registry, func()) {
		reg := prometheus.NewRegistry()
		rr, err := rerun.New(store, Rerunner{Client: New(srv.URL, "key", 0)}, rerun.Options{Clock: clock.Now, Registerer: reg, Interval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { rr.Run(ctx); close(done) }()
		return rr, reg, func() { cancel(); <-done }
	}
	lastOf := func(store *bolt.Store) keystore.Transition {
		l, err := store.Lookup(ctx, "crm", "lead-1")
		if err != nil || l.Record == nil {
			t.Fatalf("lookup: %v", err)
		}
		if tr := keystore.LastTransition(l.Record); tr != nil {
			return *tr
		}
		return keystore.Transition{}
	}

	// The first guard claims, asks, and never hears n8n's answer: it stops
	// (as SIGKILLed) with the claim in the store.
	_, _, stop := runner(store)
	testwait.For(t, "the first guard asks n8n", func() bool { return len(fake.asked()) == 1 })
	testwait.For(t, "the claim is in the store", func() bool { return lastOf(store).Event == keystore.HistoryRerunStarting })
	stop()
	store.Close()

	// Past the claim, a guard starts on the same store and takes it again.
	clock.Advance(3 * time.Minute)
	store = open()
	defer store.Close()
	rr, reg, stop := runner(store)
	defer stop()
	rr.Kick()
	testwait.For(t, "the re-run is noted as n8n's retry 101", func() bool {
		l := lastOf(store)
		return l.Event == keystore.HistoryRerunStarted && l.Detail == "101"
	})
	if got := fake.asked(); len(got) != 1 {
		t.Fatalf("n8n was asked to retry %v for one grant, want once", got)
	}
	testwait.For(t, "n8n_guard_reruns_total{result=found} counts it", func() bool { return counted(t, reg, "found") == 1 })
}

// counted is n8n_guard_reruns_total{result} as reg gathers it.
func counted(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == "n8n_guard_reruns_total" && l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func writeJSON(w http.ResponseWriter, v any) { json.NewEncoder(w).Encode(v) }

// A key that may retry but not list executions (no execution:list scope)
// still re-runs, marked unchecked so the guard says what scope is missing;
// any other failure of the list is said as any failure of n8n is.
func TestARetryWithoutTheListScopeIsAskedAndMarkedUnchecked(t *testing.T) {
	for _, c := range []struct {
		list      answer
		wantID    string
		unchecked bool
		unreach   bool
	}{
		{answer{403, `{"message":"Forbidden"}`}, "57", true, false},
		{answer{502, `<html>Bad Gateway</html>`}, "", false, true},
		{answer{200, `{"data":[{"id":"60","workflowId":"wf1","retryOf":42,"startedAt":"2026-12-07T03:00:00.000Z"}],"nextCursor":null}`}, "60", false, false},
	} {
		srv := fakeN8n(t, map[string]answer{
			"GET /api/v1/executions":           c.list,
			"GET /api/v1/executions/42":        {200, execution("42", "error", "wf1", gate, "crm", "lead-1")},
			"POST /api/v1/executions/42/retry": {200, `{"id":"57"}`},
		})
		res, err := Rerunner{Client: New(srv.URL, "key", 0)}.Retry(context.Background(), "wf1", "42", lead, time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))
		if res.ID != c.wantID || res.Unchecked != c.unchecked || errors.Is(err, rerun.ErrUnreachable) != c.unreach || res.Earlier != (c.wantID == "60") {
			t.Errorf("list answered %d: %+v %v, want id %q unchecked %v unreachable %v", c.list.status, res, err, c.wantID, c.unchecked, c.unreach)
		}
	}
}
