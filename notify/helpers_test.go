package notify_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/decision"

	"github.com/prometheus/client_golang/prometheus"

	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	slackapi "github.com/n8n-guard/n8n-guard/slack"
	bolt "go.etcd.io/bbolt"
)

// newTestClock starts the notify tests' clock at 10:00 UTC, the instant
// their expected times were written against.
func newTestClock() *fakeclock.Clock {
	return fakeclock.At(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
}

// logSink keeps every log record, so tests can count lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo {
		return nil // debug lines are not what an operator sees
	}
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}
func (l *logSink) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logSink) WithGroup(string) slog.Handler      { return l }

func (l *logSink) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *logSink) Count() int { return len(l.Lines()) }

func (l *logSink) Matching(s string) int {
	n := 0
	for _, line := range l.Lines() {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func openDB(t testing.TB, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// harness is one Service on a real bbolt file, with a test clock, a log
// sink, a private metrics registry and (optionally) the fake Slack,
// reached through the slack package over loopback. The clicks that reach
// in are carried out by a decision.Decider on the service (decider).
type harness struct {
	t     testing.TB
	path  string
	db    *bolt.DB
	svc   *Service
	dec   *decision.Decider // built at the first click (decider), under decMu
	decMu sync.Mutex        // simultaneous first clicks build one Decider
	slack Slack             // the service's Slack client (nil: none)
	in    *slackapi.Interactions
	clock *fakeclock.Clock
	logs  *logSink
	reg   *prometheus.Registry
	wire  *countingTransport
	cfg   Config
	opts  harnessOptions
}

// harnessOptions are the service's options, the decisions' and the
// Slack client's.
type harnessOptions struct {
	Options
	Keys      decision.Keys // the service's Keys as well
	Reruns    interface{ Kick() }
	Wire      slackapi.Options // nil Token: no Slack
	AppToken  string           // Socket Mode
	HasOutbox bool             // Options.Outbox was set by a tweak: keep it across restarts
}

func testConfig() Config {
	return Config{
		DefaultChannel: "C0ALERTS",
		DefaultOwner:   "U0ONCALL",
		Owners: []OwnerRule{
			{Workflow: "orders-*", Owner: "U0ORDERS", Channel: "C0ORDERS",
				Runbook: "Check the CRM for the order, then re-run the execution.", Deadline: 4 * time.Hour},
		},
		SlackPause: 50 * time.Millisecond,
	}
}

func newHarness(t testing.TB, slack *slacktest.Server, cfg Config, tweak ...func(*harnessOptions)) *harness {
	t.Helper()
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "guard.db"), clock: newTestClock(), cfg: cfg}
	h.opts = harnessOptions{
		Options: Options{
			PollInterval:   5 * time.Millisecond,
			BackoffInitial: time.Second,
			BackoffMax:     time.Minute,
		},
		Wire: slackapi.Options{Token: "xoxb-test", ConnectTimeout: time.Second, RequestTimeout: 2 * time.Second},
	}
	if slack != nil {
		h.opts.Wire.APIURL = slack.APIURL()
	} else {
		h.opts.Wire.Token = ""
	}
	for _, f := range tweak {
		f(&h.opts)
	}
	h.opts.HasOutbox = h.opts.Outbox != nil
	h.start()
	return h
}

// start opens the file and builds a Service, as a process start does.
func (h *harness) start() {
	h.t.Helper()
	h.db = openDB(h.t, h.path)
	h.logs = &logSink{}
	h.reg = prometheus.NewRegistry()
	h.wire = &countingTransport{}
	opts := h.opts.Options
	opts.Clock = h.clock.Now
	opts.Logger = slog.New(h.logs)
	opts.Registerer = h.reg
	opts.Keys = h.opts.Keys
	if !h.opts.HasOutbox {
		db := h.db
		o, err := notifybolt.New(func() *bolt.DB { return db })
		if err != nil {
			h.t.Fatal(err)
		}
		opts.Outbox = o
	}
	if w := h.opts.Wire; w.Token != "" {
		// The service's own client (its timeouts), counted on the way out.
		w.Wrap = func(rt http.RoundTripper) http.RoundTripper { h.wire.next = rt; return h.wire }
		opts.Slack = slackapi.New(w)
	}
	h.slack = opts.Slack
	svc, err := New(h.cfg, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.svc = svc
	h.in = slackapi.NewInteractions(signingSecret, harnessClicks{h}, opts.Logger)
	h.t.Cleanup(func() { h.db.Close() })
}

// decider is the service's decisions, built from the harness's options
// at the first click: a test wires its keystore, n8n and re-run worker
// after the harness started.
func (h *harness) decider() *decision.Decider {
	h.decMu.Lock()
	defer h.decMu.Unlock()
	if h.dec == nil {
		d, err := decision.New(decision.Options{Notes: h.svc, Outbox: h.svc.Outbox(), Slack: h.slack,
			Keys: h.opts.Keys, Executions: h.opts.Executions, Reruns: h.opts.Reruns,
			Logger: slog.New(h.logs), Clock: h.clock.Now, Registerer: h.reg})
		if err != nil {
			h.t.Fatal(err)
		}
		h.dec = d
	}
	return h.dec
}

// harnessClicks hands the slack adapter's clicks to the harness's
// decisions.
type harnessClicks struct{ h *harness }

func (c harnessClicks) Dispatch(clicks ...decision.Click) { c.h.decider().Dispatch(clicks...) }
func (c harnessClicks) FirstUse(ctx context.Context, mark string) (bool, error) {
	return c.h.decider().FirstUse(ctx, mark)
}
func (c harnessClicks) Refused() { c.h.decider().Refused() }

// waitClicks waits for the clicks being carried out.
func (h *harness) waitClicks() {
	h.decMu.Lock()
	dec := h.dec
	h.decMu.Unlock()
	if dec != nil {
		dec.Wait()
	}
}

// rewire drops the decisions built on the options before a test changed
// them; a click before that would have counted its metrics on collectors
// the registry no longer takes.
func (h *harness) rewire() {
	h.t.Helper()
	h.decMu.Lock()
	clicked := h.dec != nil
	h.decMu.Unlock()
	if clicked {
		h.t.Fatal("the harness was rewired after a click")
	}
}

// wireKeys sets the keystore a test opened after the service.
func (h *harness) wireKeys(keys decision.Keys, events EventSource) {
	h.rewire()
	h.opts.Keys, h.opts.Events = keys, events
	h.svc.Wire(keys, events)
}

// setExecutions sets n8n's API.
func (h *harness) setExecutions(e Executions) {
	h.rewire()
	h.opts.Executions = e
	h.svc.SetExecutions(e)
}

// setReruns sets the re-run worker "Retry execution" wakes.
func (h *harness) setReruns(r interface{ Kick() }) {
	h.rewire()
	h.opts.Reruns = r
}

// restart closes the file and starts again, as after a crash.
func (h *harness) restart() {
	h.t.Helper()
	h.decMu.Lock()
	if h.dec != nil {
		h.dec.Close()
		h.dec = nil
	}
	h.decMu.Unlock()
	if err := h.db.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.start()
}

func (h *harness) intake(body string) Accepted {
	h.t.Helper()
	a, err := h.svc.Intake(context.Background(), []byte(body))
	if err != nil {
		h.t.Fatalf("intake: %v", err)
	}
	return a
}

func (h *harness) list(status Status) []Notification {
	h.t.Helper()
	p, err := h.svc.List(context.Background(), ListQuery{Status: status, Limit: 500})
	if err != nil {
		h.t.Fatal(err)
	}
	return p.Items
}

// pass runs one worker round and returns the log lines it wrote.
func (h *harness) pass() []string {
	before := h.logs.Count()
	h.svc.Step(context.Background())
	return h.logs.Lines()[before:]
}

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "shared", "n8n", "fixtures", name))
	if err != nil {
		b, err = os.ReadFile(filepath.Join("/work/shared/n8n/fixtures", name))
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// failureBody is a minimal Error Trigger item.
func failureBody(workflow, node, message, execID string) string {
	return `{"execution":{"id":"` + execID + `","url":"http://n8n.local/workflow/W1/executions/` + execID +
		`","error":{"message":"` + message + `","name":"NodeApiError"},"lastNodeExecuted":"` + node +
		`","mode":"webhook"},"workflow":{"id":"id-` + workflow + `","name":"` + workflow + `"}}`
}

func counterValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				sum += g.GetValue()
			}
		}
	}
	return sum
}

func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}
