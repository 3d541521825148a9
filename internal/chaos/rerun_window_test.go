//go:build unix

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// stallingN8n is a stand-in of n8n's public API for one execution at its
// re-run gate. It records every retry it is asked for; a retry starts a
// new execution (retryOf the one retried, still running: it has not
// reached its gate), and the list of the workflow's executions says so
// the way n8n's does (running ones only with status=running). The first
// retry's answer never reaches the guard: the guard dies while n8n
// answers.
type stallingN8n struct {
	mu      sync.Mutex
	retries []string
	execs   []map[string]any
	release chan struct{}
}

func (f *stallingN8n) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/executions/41":
		fmt.Fprint(w, `{"id":"41","status":"error","workflowId":"wf1","data":{"resultData":{"lastNodeExecuted":"n8n-guard: re-run gate for Create contact",
			"runData":{"n8n-guard: reserve Create contact":[{"data":{"main":[[{"json":{"outcome":"accepted","namespace":"crm","key":"k1"}}]]}}]}}}}`)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/executions/41/retry":
		f.mu.Lock()
		f.retries = append(f.retries, "41")
		id := fmt.Sprint(100 + len(f.retries))
		f.execs = append(f.execs, map[string]any{"id": id, "workflowId": "wf1", "retryOf": "41", "status": "running",
			"startedAt": time.Now().UTC().Format(time.RFC3339Nano)})
		first := len(f.retries) == 1
		f.mu.Unlock()
		if first {
			select { // the guard that asked is gone: nobody hears the answer
			case <-f.release:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprintf(w, `{"id":%q,"mode":"retry","status":"running"}`, id)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/executions":
		running := r.URL.Query().Get("status") == "running"
		f.mu.Lock()
		var data []map[string]any
		for i := len(f.execs) - 1; i >= 0; i-- {
			if (f.execs[i]["status"] == "running") == running {
				data = append(data, f.execs[i])
			}
		}
		f.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"data": data, "nextCursor": nil})
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"not found"}`)
	}
}

func (f *stallingN8n) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.retries)
}

// The re-run invariant: one grant leads to at most one n8n retry of its
// execution. The window it closes: the guard dies while n8n answers a
// re-run's retry (here: a call whose answer never comes), and the retried
// execution takes longer than the claim (2 min in production, 1 s here)
// to reach its gate; the next guard takes the stale claim. It finds n8n's
// retry of the execution since the grant and notes it, instead of asking
// n8n to retry the same execution a second time (issue 42's crash window;
// before this, 2 retries for one grant). Real rerun.Runner, real
// n8n.Rerunner over HTTP, real bbolt.
func TestRerunOneGrantAtMostOneRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a claim to go stale")
	}
	ctx := context.Background()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// The key fails in execution 41, which stops at its re-run gate; a
	// person allows a retry and a re-run.
	owner := "n8n wf1 exec 41"
	r, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "k1", Owner: owner, Destination: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: "crm", Key: "k1", Token: r.Token, Reason: keystore.ReasonDestinationFailed}); err != nil {
		t.Fatal(err)
	}
	if r, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "k1", Owner: owner, Destination: "crm", Rerun: true}); err != nil || r.Outcome != keystore.OutcomeRerunNotGranted {
		t.Fatalf("gate: %v %v", r.Outcome, err)
	}
	if _, err := store.Resolve(ctx, keystore.ResolveRequest{Namespace: "crm", Key: "k1", Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "CRM back"}); err != nil {
		t.Fatal(err)
	}

	f := &stallingN8n{release: make(chan struct{})}
	srv := httptest.NewServer(f)
	defer srv.Close()
	defer close(f.release) // first: lets the dead guard's call end
	opts := rerun.Options{Pace: time.Millisecond, Interval: time.Hour, Claim: time.Second}
	start := func() context.CancelFunc {
		r, err := rerun.New(store, n8n.Rerunner{Client: n8n.New(srv.URL, "key", 0)}, opts)
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithCancel(ctx)
		go r.Run(c)
		return cancel
	}
	// The first guard asks n8n, and dies while n8n answers.
	stop := start()
	testwait.Within(t, 10*time.Second, "n8n asked for the first retry", func() bool { return f.count() >= 1 })
	stop()
	// The guard comes back (another process on the same store); the
	// retried execution has not reached its gate when the claim goes stale.
	defer start()()
	testwait.Within(t, 20*time.Second, "the re-run is noted as n8n's retry 101", func() bool {
		l, err := store.Lookup(ctx, "crm", "k1")
		if err != nil || l.Record == nil {
			return false
		}
		last := keystore.LastTransition(l.Record)
		return last != nil && last.Event == keystore.HistoryRerunStarted && last.Detail == "101"
	})
	if n := f.count(); n != 1 {
		t.Fatalf("one grant led to %d n8n retries of execution 41 (%v), want 1", n, f.retries)
	}
}
