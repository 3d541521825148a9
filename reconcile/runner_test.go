package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/reconcile"
	"github.com/prometheus/client_golang/prometheus"
)

const ns = "crm-contacts"

var policies = keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Check: "crm-lookup"}}}

type store interface {
	keystore.Store
	keystore.CheckStore
}

// fakeCheck is an n8n check workflow behind its webhook, with the
// guard's Header Auth credential. Per key it answers as told: found with a
// reference, absent, 500 (n8n's "Error in workflow"), garbage, a hang
// past the caller's timeout, or a 500 for the first n calls.
type fakeCheck struct {
	t      *testing.T
	secret string

	mu      sync.Mutex
	answers map[string]string // key -> found:<ref> | absent | 500 | garbage | hang | flaky:<n>
	calls   map[string]int
	bodies  []n8n.CheckRequest
	inCall  map[string]int
	maxIn   int
	release chan struct{} // "wait": answers found when closed
}

func newFakeCheck(t *testing.T, answers map[string]string) (*fakeCheck, *httptest.Server) {
	f := &fakeCheck{t: t, secret: "s3cret", answers: answers, calls: map[string]int{}, inCall: map[string]int{}, release: make(chan struct{})}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(n8n.CheckDefaultHeader) != f.secret || r.Header.Get(n8n.ResumeDefaultHeader) != "" {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"code":403,"message":"Authorization data is wrong!"}`)
		return
	}
	var req n8n.CheckRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		f.t.Errorf("check body: %v", err)
	}
	f.mu.Lock()
	f.calls[req.Key]++
	n := f.calls[req.Key]
	f.inCall[req.Key]++
	f.maxIn = max(f.maxIn, f.inCall[req.Key])
	f.bodies = append(f.bodies, req)
	ans := f.answers[req.Key]
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inCall[req.Key]--; f.mu.Unlock() }()
	var flaky int
	fmt.Sscanf(ans, "flaky:%d", &flaky)
	switch {
	case ans == "hang":
		<-r.Context().Done()
	case ans == "wait":
		<-f.release
		fmt.Fprint(w, `{"result":"found","reference":"crm-late"}`)
	case ans == "500":
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"code":0,"message":"Error in workflow"}`)
	case ans == "garbage":
		fmt.Fprint(w, `<html>Workflow was started</html>`)
	case ans == "absent":
		fmt.Fprint(w, `{"result":"absent","workflow":"lead check","execution":"88"}`)
	case len(ans) > 6 && ans[:6] == "found:":
		fmt.Fprintf(w, `[{"result":"found","reference":%q,"workflow":"lead check","execution":"87"}]`, ans[6:])
	case flaky > 0:
		if n <= flaky {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, `{"result":"found","reference":"crm-flaky"}`)
	default:
		f.t.Errorf("unexpected check of %s", req.Key)
	}
}

func (f *fakeCheck) callsOf(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

func openBolt(t *testing.T) store {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: policies})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// unknown makes key unknown: its CRM call timed out.
func unknown(t *testing.T, s store, key, resume string) {
	t.Helper()
	ctx := context.Background()
	r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: "wf lead / exec 12"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: r.Token, Reason: keystore.ReasonOutcomeUnknown, Message: "CRM timeout", ResumeURL: resume}); err != nil {
		t.Fatal(err)
	}
}

func runner(t *testing.T, s store, srv *httptest.Server, reg prometheus.Registerer, mod ...func(*reconcile.Options)) (stop func()) {
	t.Helper()
	o := reconcile.Options{Store: s, Registerer: reg, Interval: 20 * time.Millisecond, Backoff: 10 * time.Millisecond, Tries: 3,
		Checks: map[string]reconcile.Caller{"crm-lookup": &n8n.CheckCaller{URL: srv.URL + "/webhook/lead-check", Secret: "s3cret", Timeout: 200 * time.Millisecond}}}
	for _, m := range mod {
		m(&o)
	}
	r, err := reconcile.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func settled(s store, key string) func() bool {
	return func() bool {
		r, err := s.Lookup(context.Background(), ns, key)
		return err == nil && r.Record != nil && r.Record.Check == nil
	}
}

func eventsOf(t *testing.T, s store, key string) []keystore.Event {
	evs, err := s.Events(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []keystore.Event
	for _, e := range evs {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

func TestChecksDecideOrPage(t *testing.T) {
	cases := []struct {
		name   string
		answer string
		state  keystore.State
		ref    string
		event  keystore.EventKind
		calls  int
		metric string
	}{
		{"found: completed with the CRM's id, no page", "found:crm-77", keystore.StateCompleted, "crm-77", keystore.EventKeyResolved, 1, "found"},
		{"absent: failed and retryable, no page", "absent", keystore.StateFailed, "", keystore.EventKeyResolved, 1, "absent"},
		{"500 every time: tried 3 times, then the person is paged", "500", keystore.StateUnknown, "", keystore.EventKeyUnknown, 3, "paged"},
		{"no answer in time: tried 3 times, then paged", "hang", keystore.StateUnknown, "", keystore.EventKeyUnknown, 3, "paged"},
		{"garbage: paged at once (tried again it says the same)", "garbage", keystore.StateUnknown, "", keystore.EventKeyUnknown, 1, "paged"},
		{"two 502s, then found: the backoff gets the answer", "flaky:2", keystore.StateCompleted, "crm-flaky", keystore.EventKeyResolved, 3, "found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openBolt(t)
			f, srv := newFakeCheck(t, map[string]string{"evt_1": c.answer})
			reg := prometheus.NewRegistry()
			unknown(t, s, "evt_1", "")
			runner(t, s, srv, reg)
			testwait.For(t, "the check to settle the key", settled(s, "evt_1"))
			r, _ := s.Lookup(context.Background(), ns, "evt_1")
			if r.Record.State != c.state || r.Record.ResultRef != c.ref {
				t.Fatalf("state %s ref %q, want %s %q", r.Record.State, r.Record.ResultRef, c.state, c.ref)
			}
			evs := eventsOf(t, s, "evt_1")
			if len(evs) != 1 || evs[0].Kind != c.event {
				t.Fatalf("events %+v, want one %s", evs, c.event)
			}
			if n := f.callsOf("evt_1"); n != c.calls {
				t.Fatalf("%d calls, want %d", n, c.calls)
			}
			testwait.For(t, "n8n_guard_checks_total{result="+c.metric+"} 1", func() bool { return checksTotal(t, reg, c.metric) == 1 })
			f.mu.Lock()
			b := f.bodies[0]
			f.mu.Unlock()
			if b.Namespace != ns || b.Key != "evt_1" || b.Attempt != 1 || b.LeaseOwner != "wf lead / exec 12" || b.AttemptStartedAt.IsZero() {
				t.Fatalf("the check was asked %+v", b)
			}
		})
	}
}

func checksTotal(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "n8n_guard_checks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A person who decides while the check runs is not overruled: the late
// answer is dropped and counted.
func TestAPersonsDecisionStands(t *testing.T) {
	s := openBolt(t)
	f, srv := newFakeCheck(t, map[string]string{"evt_1": "wait"})
	reg := prometheus.NewRegistry()
	unknown(t, s, "evt_1", "")
	runner(t, s, srv, reg, func(o *reconcile.Options) {
		o.Checks["crm-lookup"].(*n8n.CheckCaller).Timeout = 5 * time.Second
	})
	testwait.For(t, "the check to be called", func() bool { return f.callsOf("evt_1") == 1 })
	res, err := s.Resolve(context.Background(), keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: keystore.StateFailed, By: "ops@example", Note: "not in the CRM"})
	if err != nil {
		t.Fatal(err)
	}
	close(f.release)
	testwait.For(t, "the answer to be dropped", func() bool { return checksTotal(t, reg, "superseded") == 1 })
	r, _ := s.Lookup(context.Background(), ns, "evt_1")
	if r.Record.State != keystore.StateFailed || r.Record.ResolvedBy != "ops@example" || r.Record.UpdatedAt != res.Record.UpdatedAt {
		t.Fatalf("the check overruled the person: %+v", r.Record)
	}
}

// A guard stopped mid-call records nothing: the key still waits, and the
// next guard calls the check once its claim lapsed.
func TestStoppedMidCallAndRestarted(t *testing.T) {
	s := openBolt(t)
	f, srv := newFakeCheck(t, map[string]string{"evt_1": "hang"})
	unknown(t, s, "evt_1", "")
	stop := runner(t, s, srv, nil, func(o *reconcile.Options) {
		o.Claim = 400 * time.Millisecond
		o.Checks["crm-lookup"].(*n8n.CheckCaller).Timeout = 5 * time.Second
	})
	testwait.For(t, "the check to be called", func() bool { return f.callsOf("evt_1") == 1 })
	stop()
	r, _ := s.Lookup(context.Background(), ns, "evt_1")
	if r.Record.State != keystore.StateUnknown || r.Record.Check == nil || len(eventsOf(t, s, "evt_1")) != 0 {
		t.Fatalf("a stopped guard decided or paged: %+v", r.Record)
	}
	f.mu.Lock()
	f.answers["evt_1"] = "found:crm-9"
	f.mu.Unlock()
	runner(t, s, srv, nil, func(o *reconcile.Options) { o.Claim = 400 * time.Millisecond })
	testwait.For(t, "the next guard to settle the key", settled(s, "evt_1"))
	if r, _ := s.Lookup(context.Background(), ns, "evt_1"); r.Record.State != keystore.StateCompleted || r.Record.ResultRef != "crm-9" {
		t.Fatalf("after the restart: %+v", r.Record)
	}
}

// A check taken out of the config while keys wait for it: they are paged.
func TestCheckNoLongerConfigured(t *testing.T) {
	s := openBolt(t)
	_, srv := newFakeCheck(t, nil)
	unknown(t, s, "evt_1", "")
	runner(t, s, srv, nil, func(o *reconcile.Options) { o.Checks = map[string]reconcile.Caller{} })
	testwait.For(t, "the page", settled(s, "evt_1"))
	if evs := eventsOf(t, s, "evt_1"); len(evs) != 1 || evs[0].Kind != keystore.EventKeyUnknown {
		t.Fatalf("events %+v", evs)
	}
}

// Three guards on one PostgreSQL, 20 keys: every check is called exactly
// once, never twice at once.
func TestThreeGuardsOnPostgreSQL(t *testing.T) {
	url := pgtest.FreshSchema(t, pgtest.URL(t, "checks on PostgreSQL"))
	var stores []store
	for i := 0; i < 3; i++ {
		s, err := postgres.Open(context.Background(), url, postgres.Options{Policies: policies})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	answers := map[string]string{}
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("evt_%d", i)
		answers[key] = "found:crm-" + key
		unknown(t, stores[0], key, "")
	}
	f, srv := newFakeCheck(t, answers)
	var calls atomic.Int32
	for _, s := range stores {
		runner(t, s, srv, nil)
	}
	for key := range answers {
		testwait.For(t, key, settled(stores[0], key))
		calls.Add(int32(f.callsOf(key)))
		if n := f.callsOf(key); n != 1 {
			t.Errorf("%s: the check was called %d times", key, n)
		}
	}
	if f.maxIn > 1 {
		t.Errorf("a check was called twice at once")
	}
}
