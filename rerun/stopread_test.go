package rerun_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	n8napi "github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// SIGTERM while the guard still reads the execution from n8n's API
// (before it posts the retry): the grace is for an ask n8n may act on,
// and nothing was asked yet, so the read is cut at the stop, no retry is
// posted after it, and the keys' claims go back at once: the next guard asks without waiting
// for a lapse. A retry posted after the stop would outlive the guard's
// note of it (the grace may end first), and without n8n's execution:list
// scope a grant could then be re-run twice.
func TestAStopWhileN8nIsReadPostsNoRetry(t *testing.T) {
	e := setup(t)
	e.atGate("own", "41", "crm")
	e.grant("own")
	reading := make(chan struct{})
	release := make(chan struct{})
	var posted, reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case req.Method == http.MethodGet && req.URL.Path == "/api/v1/executions/41":
			if reads.Add(1) == 1 {
				close(reading)
				<-release // a large execution, read slowly
			}
			fmt.Fprintf(w, `{"id":"41","status":"error","workflowId":"wf1","data":{"resultData":{"lastNodeExecuted":%q,"runData":{%q:[{"data":{"main":[[{"json":{"statusCode":200,"body":{"outcome":"accepted","namespace":"crm","key":"own"}}}]]}}]}}}}`,
				rerun.GateNodePrefix+"W", n8napi.ReserveNodePrefix+"W")
		case req.Method == http.MethodGet && req.URL.Path == "/api/v1/executions":
			fmt.Fprint(w, `{"data":[],"nextCursor":null}`)
		case req.Method == http.MethodPost && req.URL.Path == "/api/v1/executions/41/retry":
			posted.Add(1)
			fmt.Fprint(w, `{"id":"57"}`)
		default:
			http.Error(w, "unexpected "+req.Method+" "+req.URL.String(), http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	var answer sync.Once
	answerRead := func() { answer.Do(func() { close(release) }) }
	defer answerRead() // before srv.Close: it waits for the handler
	n8n := n8napi.Rerunner{Client: n8napi.New(srv.URL, "k", time.Minute)}
	r := newRunner(t, e, n8n, rerun.Options{Name: "guard-a", Grace: time.Hour, Reads: -1, Pace: time.Millisecond, Interval: time.Hour})
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { rerun.Round(ctx, r); close(done) }()
	<-reading
	stop() // SIGTERM: n8n has not been asked to retry yet
	select {
	case <-done: // the read is cut at the stop: the grace is not for it
	case <-time.After(testwait.Deadline):
		t.Fatal("the round did not end at the stop: it waits for a read the grace is not for")
	}
	answerRead()
	if n := posted.Load(); n != 0 {
		t.Fatalf("the retry was posted %d time(s) after the stop: a stopping guard asked n8n what it had not asked before SIGTERM", n)
	}
	if l := e.last("own"); l.Event == keystore.HistoryRerunStarting {
		t.Fatalf("the key's claim was not handed back after the stop: %+v (it waits for a lapse)", l)
	}
	// The next guard asks at once, and once.
	rerun.Round(e.ctx, newRunner(t, e, n8n, rerun.Options{Name: "guard-b", Reads: -1, Pace: time.Millisecond, Interval: time.Hour}))
	if n := posted.Load(); n != 1 {
		t.Fatalf("the next guard posted the retry %d times, want once", n)
	}
	if l := e.last("own"); l.Event != keystore.HistoryRerunStarted {
		t.Fatalf("after the next guard's round the key is %+v, want %s", l, keystore.HistoryRerunStarted)
	}
}
