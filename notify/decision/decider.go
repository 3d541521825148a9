package decision

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// Keys is the part of the keystore a decision goes through
// (keystore.Store satisfies it).
type Keys interface {
	Lookup(ctx context.Context, namespace, key string) (keystore.Result, error)
	Resolve(ctx context.Context, req keystore.ResolveRequest) (keystore.Result, error)
	// List finds the keys waiting at an execution's re-run gate (rerun.go).
	List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error)
	keystore.ApprovalStore // Approve / Reject buttons
	keystore.AckStore      // "Leave it to me" and Snooze, in the key's history
	// Decisions on failed executions, for the audit (failure.go).
	keystore.DecisionRecorder
}

// Options are what the decisions go through; Notes and Outbox are
// required, the rest as for notify.Options (the same values).
type Options struct {
	// Notes is the notification service whose messages are decided on.
	Notes *notify.Service
	// Outbox is Notes' outbox: the notifications read, the signatures
	// seen (FirstUse).
	Outbox notify.Outbox
	// Slack answers the person who clicked and opens the reason form of
	// a rejection; nil: no answer, no form (SLACK_BOT_TOKEN is empty).
	Slack notify.Slack
	// Keys resolves keys decided from Slack (nil: the key buttons answer
	// that they cannot).
	Keys Keys
	// Executions enables "Retry execution"; nil: the button answers that
	// it cannot.
	Executions notify.Executions
	// Reruns wakes the guard's re-run worker (rerun.Runner) after "Retry
	// execution" allowed the re-run of an execution that waits at its
	// re-run gate (rerun.go); nil: the button asks n8n to retry directly.
	Reruns interface{ Kick() }

	Logger     *slog.Logger
	Clock      keystore.Clock
	Registerer prometheus.Registerer // nil: metrics are not registered
	// ClickTimeout bounds carrying out one click: its Slack calls and, for
	// a retry, n8n's answer (default 3.5 min).
	ClickTimeout time.Duration
}

// Decider carries out the clicks on the messages' buttons and the
// decisions taken in the console.
type Decider struct {
	notes      *notify.Service
	outbox     notify.Outbox
	slack      notify.Slack // nil when no token is configured
	keys       Keys
	executions notify.Executions
	reruns     interface{ Kick() }
	log        *slog.Logger
	now        keystore.Clock
	timeout    time.Duration
	m          *metrics

	// Clicks run on their own goroutines, which Close waits for; two
	// decisions about one notification take turns (locks.go).
	clickLocks keyLocks
	clicks     sync.WaitGroup
	life       context.Context
	end        context.CancelFunc
}

// New prepares the decisions on opts.Notes.
func New(opts Options) (*Decider, error) {
	if opts.Notes == nil || opts.Outbox == nil {
		return nil, errors.New("decision: no notification service or outbox")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	d := &Decider{
		notes: opts.Notes, outbox: opts.Outbox, slack: opts.Slack, keys: opts.Keys, executions: opts.Executions, reruns: opts.Reruns,
		log: opts.Logger.With("component", "notify"), now: opts.Clock,
		// Three Slack calls of 30 s and n8n's answer to a retry.
		timeout: cmp.Or(max(opts.ClickTimeout, 0), 3*30*time.Second+2*time.Minute),
	}
	var err error
	if d.m, err = newMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	d.life, d.end = context.WithCancel(context.Background())
	return d, nil
}

// Close waits for the clicks being carried out (their Slack calls are cut
// short after 10 s); the caller owns the service and the outbox.
func (d *Decider) Close() error {
	done := make(chan struct{})
	go func() { d.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		d.end() // Slack calls of a click are cut short
		<-done
	}
	d.end()
	return nil
}

// Wait returns once every click dispatched so far is carried out.
func (d *Decider) Wait() { d.clicks.Wait() }

// replayWindow is Slack's: a request older than this is refused, and one
// seen within it is a replay.
const replayWindow = 5 * time.Minute

// FirstUse records a signed request's identity (mark) in the outbox and
// reports whether it is the first time: a request within Slack's window,
// before or after it, is used once, across restarts and replicas.
func (d *Decider) FirstUse(ctx context.Context, mark string) (bool, error) {
	now := d.now()
	// Slack accepts a timestamp up to replayWindow away either way: a
	// signature stays valid for twice the window.
	return d.outbox.FirstUse(ctx, mark, now, now.Add(2*replayWindow))
}

// Refused counts an interactivity request refused as unsigned, wrongly
// signed, replayed or stale.
func (d *Decider) Refused() { d.m.refused.Inc() }

// Dispatch carries out clicks, each on a goroutine that outlives the
// request (Close waits for it).
func (d *Decider) Dispatch(clicks ...Click) {
	for _, c := range clicks {
		d.clicks.Add(1)
		go func() {
			defer d.clicks.Done()
			defer func() {
				// A click must not take the guard (and its API) down.
				if p := recover(); p != nil {
					d.log.Error("panic while carrying out a Slack click", "panic", p, "action", c.Action, "value", c.Value,
						"stack", string(debug.Stack()))
				}
			}()
			ctx, cancel := context.WithTimeout(d.life, d.timeout)
			defer cancel()
			d.act(ctx, c)
		}()
	}
}

type metrics struct {
	decisions     *prometheus.CounterVec
	refused       prometheus.Counter
	refusedClicks prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_notify_decisions_total",
			Help: "Decisions taken with a message's buttons in Slack, by decision.",
		}, []string{"decision"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "n8n_guard_notify_interactions_refused_total",
			Help: "Slack interactivity requests refused: unsigned, wrongly signed, replayed or stale.",
		}),
		refusedClicks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "n8n_guard_notify_clicks_out_of_date_total",
			Help: "Button clicks on a message shown for an earlier key attempt or state: answered \"out of date\", nothing changed.",
		}),
	}
	if err := prom.Register(reg, m.decisions, m.refused, m.refusedClicks); err != nil {
		return nil, err
	}
	return m, nil
}
