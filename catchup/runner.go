package catchup

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/prometheus/client_golang/prometheus"
)

// Store is what the runner needs of a store.
type Store interface {
	keystore.ParkStore
	keystore.CommitFeed // wakes the runner, the workers and the watches of resumed executions
	// CommittedKeys wakes the approval resumer by the commits of decided
	// keys alone (approval.go).
	keystore.KeyedCommitFeed
	Lookup(ctx context.Context, namespace, key string) (keystore.Result, error)
	// Destinations are the breakers: a worker notes when its
	// destination's closed, the start of its catch-up.
	Destinations(ctx context.Context) ([]keystore.Breaker, error)
	List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error)
	// KeysAtStage finds the decided keys of namespaces that require
	// approval (approval.go).
	keystore.StageReader
}

// Resumer calls one parked execution's resume URL (n8n.ResumeCaller).
type Resumer interface {
	Resume(ctx context.Context, r *keystore.Record) n8n.ResumeOutcome
}

// Options configure a Runner.
type Options struct {
	Store    Store
	Resumer  Resumer
	Policies keystore.Policies
	Logger   *slog.Logger
	// Registerer takes the runner's metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Interval is how often the parked keys, and a resumed execution's
	// key, are looked at when no commit of this process's store woke the
	// runner: the fallback for another guard's commits on a shared
	// PostgreSQL (default 1 s).
	Interval time.Duration
	// Claim is how long one guard holds a key's resume call: the retries
	// of one claim fit in it; a claim left by a crash lapses after it
	// (default 2 min).
	Claim time.Duration
	// Poll is how often a resume call looks again for a free slot while
	// every slot of its destination is held, for another guard's
	// releases (this process's wake the call at once: the store's
	// PaceFreed); default Interval.
	Poll time.Duration
	// Grace is how long a stop waits for a call to n8n already in flight
	// (n8n may act on it: its answer is recorded, so the key needs no
	// claim's lapse); a call that outlives it is cut (default 10 s).
	Grace time.Duration
	Clock keystore.Clock
	// Sleep waits d or until ctx ends (default: a timer). Every wait of
	// the runner goes through it, so a test on a controlled clock moves
	// the clock instead of waiting.
	Sleep func(ctx context.Context, d time.Duration)

	// paced, when set (tests: export_test.go), is told each time a
	// destination's resume call takes its turn, at the clock's reading
	// the pace was decided on.
	paced func(dest string, at time.Time)
}

// Runner is the catch-up: one worker per destination that has parked keys.
type Runner struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	now     keystore.Clock
	claims  calls.Claims // the resume claims' keeping
}

// New returns a Runner; Run starts it.
func New(opts Options) (*Runner, error) {
	opts = opts.withDefaults()
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m.known(opts.Policies)
	return &Runner{opts: opts, log: opts.Logger, metrics: m, now: opts.Clock,
		claims: calls.Claims{Length: opts.Claim, Every: opts.Interval, Clock: opts.Clock, What: "catch-up: a resume claim"}}, nil
}

// Run looks at the parked keys at each commit of the store (a key parked,
// a breaker closed) and every Interval until ctx ends, and starts a worker
// for each destination that has some and no worker (calls.Loop: a
// destination's worker is its call). Every overdueEvery on the runner's
// clock it starts a sweep for silent woken executions beside them, so a
// long listing delays no worker.
func (r *Runner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.runApprovals(ctx) // approval.go
	}()
	var swept time.Time // written by the loop's goroutine only (the sweep's Begin)
	calls.Loop{Commits: r.opts.Store, Interval: r.opts.Interval, Slots: calls.Unbounded}.Run(ctx, func(ctx context.Context) ([]calls.Call, time.Duration) {
		var out []calls.Call
		if now := r.now(); now.Sub(swept) >= overdueEvery {
			out = append(out, calls.Call{Key: "sweep",
				Begin: func(context.Context) (bool, bool) { swept = now; return true, true }, // not while one runs
				Run:   func(ctx context.Context) time.Duration { r.sweepSilent(ctx); return 0 }})
		}
		counts, err := r.opts.Store.ParkedCounts(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("catch-up: cannot count the parked keys; trying again", "err", err)
			}
			return out, 0
		}
		r.metrics.set(r.metrics.parked, counts)
		// The woken gauge is the store's count, as /v1/destinations shows it.
		if woken, err := r.opts.Store.WokenCounts(ctx); err == nil {
			r.metrics.set(r.metrics.woken, woken)
		}
		for dest, n := range counts {
			if n > 0 {
				out = append(out, calls.Call{Key: "worker\x00" + dest,
					Run: func(ctx context.Context) time.Duration { r.work(ctx, dest, n); return 0 }})
			}
		}
		return out, 0
	})
	return ctx.Err()
}

// overdueEvery is how often a worker looks for keys parked longer than
// their namespace's parked_limit, and the runner sweeps for woken
// executions that went silent.
const overdueEvery = time.Minute

// wokenBound is how long a woken execution has to reserve its key again,
// from n8n's acceptance of its resume call: a lease of its namespace, the
// time a reserved attempt has to finish. Its first step is that reserve,
// so one that has not reserved within a lease died; its slot and, for a
// probe, its destination (keystore: a woken probe is held for a lease)
// are freed then, not a claim later (the call is over: its answer is
// recorded).
func (r *Runner) wokenBound(namespace string) time.Duration {
	return r.opts.Policies.Namespace(namespace).Lease
}

// loseSilent records a woken execution that never reserved its key again
// as lost: its owner is told (the store's parked_lost event), the
// destination's probe is given up if it was one, and the guard never
// calls its resume URL again. One log line per key: each is a person's
// decision.
func (r *Runner) loseSilent(ctx context.Context, rec *keystore.Record, bound time.Duration) bool {
	detail := keystore.WokenSilentDetail(rec, bound)
	got, err := r.opts.Store.ResumeAnswered(ctx, rec.Namespace, rec.Key, *rec.ParkedAt, keystore.ResumeSilent, detail)
	if err != nil {
		r.log.Warn("catch-up: a woken execution that went silent could not be recorded lost; trying again", "namespace", rec.Namespace, "key", rec.Key, "err", err)
		return false
	}
	if got == nil || got.Reason != keystore.ReasonResumeLost {
		return false // it reserved meanwhile
	}
	r.metrics.lost.WithLabelValues(rec.Destination).Inc()
	r.log.Error("woken execution went silent: n8n accepted the resume call but the execution never reserved its key again; its owner is told in Slack and must decide",
		"destination", rec.Destination, "namespace", rec.Namespace, "key", rec.Key, "woken_at", rec.ResumeSentAt.UTC().Format(time.RFC3339), "bound", bound.String())
	return true
}

// sweepSilent finds, across every namespace, the parked keys whose woken
// execution went silent (keystore.WokenSilent) and records them lost:
// the watch of awaitFinish ends with its guard, the sweep does not (a
// guard restarted, another replica woke the key).
func (r *Runner) sweepSilent(ctx context.Context) {
	now := r.now()
	for rec, err := range keystore.Listed(ctx, r.opts.Store, keystore.ListQuery{State: keystore.StateParked, Limit: 500}) {
		if err != nil {
			if ctx.Err() == nil { // a guard told to stop says nothing
				r.log.Warn("catch-up: cannot list the parked keys to find silent woken executions; trying again later", "err", err)
			}
			return
		}
		if bound := r.wokenBound(rec.Namespace); keystore.WokenSilent(rec, bound, now) {
			r.loseSilent(ctx, rec, bound)
		}
	}
}

// reportOverdue hands the store every parked key of the worker's
// destination that waited longer than its namespace's parked_limit. The
// store records each parked attempt's report once, with an event for its
// owner's Slack message (keystore.DecideParkedOverdue), whichever guard
// finds it first and however often it restarts; w.overdue only spares
// repeated calls, and keeps the attempts of the last whole pass alone, so
// keys resumed, lost or resolved meanwhile leave it. One log line says
// how many were reported.
func (w *worker) reportOverdue(ctx context.Context, now time.Time) {
	r, reported, whole := w.r, 0, false
	listed := make(map[string]bool, len(w.overdue))
	defer func() {
		if !whole {
			maps.Copy(listed, w.overdue) // a pass cut short forgets nothing
		}
		w.overdue = listed
		if reported > 0 {
			r.log.Error("events parked longer than their namespace's parked_limit: their owners are told in Slack; a person must look at the destination",
				"destination", w.dest, "reported", reported)
		}
	}()
	// Only the overdue keys are read: the store lists them by the start
	// of their wait (their first parking, kept when an event parks anew
	// in a rolling outage), one read per parked_limit
	// (keystore.Policies.OverdueReads), each stopping at the first key
	// within its limit.
	q := keystore.WaitQuery{Destination: w.dest, Stages: keystore.QueuedStages, Limit: 500}
	for _, q := range r.opts.Policies.OverdueReads(q, now) {
		for rec, err := range keystore.ByWait(ctx, r.opts.Store, q) {
			if err != nil { // a pass cut short: tried again at the next
				if ctx.Err() == nil {
					r.log.Warn("catch-up: cannot list the overdue parked keys; trying again", "destination", w.dest, "err", err)
				}
				return
			}
			id := rec.Namespace + "\x00" + rec.Key + "\x00" + rec.WaitingSince().String()
			if w.overdue[id] {
				listed[id] = true
				continue
			}
			limit := r.opts.Policies.Namespace(rec.Namespace).ParkedLimit
			ok, err := r.opts.Store.ParkedOverdue(ctx, rec.Namespace, rec.Key, *rec.ParkedAt, limit)
			if err != nil {
				r.log.Warn("catch-up: cannot record an overdue parked key; trying again", "destination", w.dest, "namespace", rec.Namespace, "key", rec.Key, "err", err)
				return
			}
			listed[id] = true
			if ok {
				reported++
				r.metrics.overdue.WithLabelValues(rec.Namespace).Inc()
			}
		}
	}
	whole = ctx.Err() == nil
}

func answerName(a keystore.ResumeAnswer) string {
	switch a {
	case keystore.ResumeAccepted:
		return "accepted"
	case keystore.ResumeLost:
		return "lost"
	}
	return "retry"
}

type metrics struct {
	parked   *prometheus.GaugeVec
	woken    *prometheus.GaugeVec
	inFlight *prometheus.GaugeVec
	resumes  *prometheus.CounterVec
	lost     *prometheus.CounterVec
	overdue  *prometheus.CounterVec
	catchUp  *prometheus.HistogramVec
	mu       sync.Mutex
	seen     map[string]bool // destinations with a parked gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "n8n_guard_parked",
			Help: "Events parked in n8n waiting to be resumed, by destination."}, []string{"destination"}),
		woken: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "n8n_guard_parked_woken",
			Help: "Parked events whose execution n8n took the resume call for and that have not reserved their key again yet, by destination (the store's count, read every catch-up interval; past a lease they are recorded lost)."}, []string{"destination"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "n8n_guard_resumes_in_flight",
			Help: "Parked executions resumed and not finished yet, by destination (at most catch_up_concurrency)."}, []string{"destination"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_resume_calls_total",
			Help: "Resume calls to n8n, by destination and answer (accepted, lost, retry)."}, []string{"destination", "answer"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_parked_lost_total",
			Help: "Parked executions n8n no longer held (404, 409 finished) or that went silent after waking: a person must decide, by destination."}, []string{"destination"}),
		overdue: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_parked_overdue_total",
			Help: "Events found parked longer than their namespace's parked_limit, by namespace."}, []string{"namespace"}),
		catchUp: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "n8n_guard_catch_up_seconds",
			Help:    "From the breaker's close to the last parked event resumed, per outage, by destination (the span of the caught-up line and the outage's Slack message).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10)}, []string{"destination"}),
		seen: map[string]bool{},
	}
	if err := prom.Register(reg, m.parked, m.woken, m.inFlight, m.resumes, m.lost, m.overdue, m.catchUp); err != nil {
		return nil, err
	}
	return m, nil
}

// known makes the series of the configured destinations and namespaces at
// 0 from start, so that an alert's increase() sees their first lost or
// overdue event (a series born at 1 shows no increase).
func (m *metrics) known(p keystore.Policies) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := range p.Destinations {
		m.seen[d] = true
		m.parked.WithLabelValues(d)
		m.woken.WithLabelValues(d)
		m.lost.WithLabelValues(d)
	}
	for ns := range p.Namespaces {
		m.overdue.WithLabelValues(ns)
	}
}

// set sets g (parked, woken) of every destination seen, 0 when counts
// has none of its keys.
func (m *metrics) set(g *prometheus.GaugeVec, counts map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := range counts {
		m.seen[d] = true
	}
	for d := range m.seen {
		g.WithLabelValues(d).Set(float64(counts[d]))
	}
}

func (m *metrics) caughtUp(dest string, took time.Duration) {
	m.catchUp.WithLabelValues(dest).Observe(took.Seconds())
}
