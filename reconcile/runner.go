package reconcile

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/internal/callback"
	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/prometheus/client_golang/prometheus"
)

// Caller calls one check (n8n.CheckCaller).
type Caller interface {
	Call(ctx context.Context, req n8n.CheckRequest) n8n.CheckOutcome
}

// Store is what the runner needs of a store.
type Store interface {
	keystore.CheckStore
	keystore.CommitFeed // a key held for its check is a commit: it wakes the runner
}

// Options configure a Runner.
type Options struct {
	Store Store
	// Checks are the configured checks by name (keystore.Policies.CheckFor).
	Checks map[string]Caller
	Logger *slog.Logger
	Clock  keystore.Clock // default time.Now
	// Registerer takes the runner's metrics (nil: not registered).
	Registerer prometheus.Registerer
	// Interval is how often the held keys are looked at when no commit of
	// this process's store woke the runner: the fallback for another
	// guard's commits on a shared PostgreSQL (default 1 s).
	Interval time.Duration
	// Claim is how long one guard's claim of a key's check call holds
	// unless extended: it is extended while the call is in flight and
	// handed back when the guard stops, so it lapses only when its guard
	// died; the backoff of one claim's tries ends within three quarters
	// of it (default 2 min).
	Claim time.Duration
	// Tries is how many calls one claim makes while the check gives no
	// usable answer but may (5xx, no answer); default 3. TriesOf sets it
	// per check.
	Tries   int
	TriesOf map[string]int
	// Backoff is the first wait between tries (default 500 ms), doubled
	// each time up to 10 s.
	Backoff time.Duration
	// MaxClaims bounds the claims of one key (crashes mid-call); default
	// keystore.DefaultCheckClaims.
	MaxClaims int
	// Concurrency is how many checks run at once (default 4).
	Concurrency int
}

// Runner asks the checks of the held keys.
type Runner struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	now     keystore.Clock
	claims  calls.Claims
}

// New returns a Runner; Run starts it.
func New(opts Options) (*Runner, error) {
	opts = opts.withDefaults()
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Runner{opts: opts, log: opts.Logger, metrics: m, now: opts.Clock,
		claims: calls.Claims{Length: opts.Claim, Every: opts.Interval, Clock: opts.Clock, What: "checks: a check's claim"}}, nil
}

// withDefaults fills in every default of Options, as their comments say:
// the one place they are applied. A zero or negative number is the
// default.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Interval = cmp.Or(max(o.Interval, 0), time.Second)
	o.Claim = cmp.Or(max(o.Claim, 0), 2*time.Minute)
	o.Tries = cmp.Or(max(o.Tries, 0), 3)
	o.Backoff = cmp.Or(max(o.Backoff, 0), 500*time.Millisecond)
	o.MaxClaims = cmp.Or(max(o.MaxClaims, 0), keystore.DefaultCheckClaims)
	o.Concurrency = cmp.Or(max(o.Concurrency, 0), 4)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Run looks at the held keys at each commit of the store and every
// Interval until ctx ends (calls.Loop: at most Concurrency checks at
// once, never two of one key), and returns once every check it started
// ended.
func (r *Runner) Run(ctx context.Context) error {
	calls.Loop{Commits: r.opts.Store, Interval: r.opts.Interval, Slots: r.opts.Concurrency}.Run(ctx, r.look)
	return ctx.Err()
}

// look lists the held keys and makes a call of each whose check no guard
// holds.
func (r *Runner) look(ctx context.Context) ([]calls.Call, time.Duration) {
	recs, err := r.opts.Store.HeldForCheck(ctx, 100)
	switch {
	case ctx.Err() != nil:
		return nil, 0
	case err != nil:
		r.log.Warn("checks: cannot list the keys waiting for their check; trying again", "err", err)
		return nil, 0
	}
	r.metrics.held.Set(float64(len(recs)))
	var out []calls.Call
	now := r.now()
	for _, rec := range recs {
		if rec.Check.ClaimUntil != nil && now.Before(*rec.Check.ClaimUntil) {
			continue // being checked (by this guard or another)
		}
		out = append(out, calls.Call{Key: rec.Namespace + "\x00" + rec.Key, Run: func(ctx context.Context) time.Duration {
			r.checkOne(ctx, rec)
			return 0
		}})
	}
	return out, 0
}

// checkOne claims, calls and records the check of one held key.
func (r *Runner) checkOne(ctx context.Context, rec *keystore.Record) {
	ns, key, attempt, name := rec.Namespace, rec.Key, rec.Attempt, rec.Check.Check
	log := r.log.With("namespace", ns, "key", key, "attempt", attempt, "check", name)
	caller := r.opts.Checks[name]
	if caller == nil {
		// The check was taken out of the config while the key waited.
		r.record(ctx, log, rec, keystore.CheckAnswer{Result: keystore.CheckFailed, Detail: "the check " + name + " is no longer configured"})
		return
	}
	claimed, c, err := r.opts.Store.ClaimCheck(ctx, ns, key, attempt, r.opts.Claim, r.opts.MaxClaims)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			log.Warn("checks: cannot claim a key's check; trying again", "err", err)
		}
		return
	case c == keystore.CheckRefused:
		return
	case c == keystore.CheckGaveUp:
		r.metrics.checks.WithLabelValues("paged").Inc()
		log.Warn("check: no answer after every claim (guards stopped mid-call); the person is paged", "claims", r.opts.MaxClaims)
		return
	}
	// The claim never lapses under a live call, so no second guard asks
	// the check meanwhile.
	var until *time.Time
	if h := claimed.Check; h != nil {
		until = h.ClaimUntil
	}
	keeper := r.claims.Keep(ctx, log, until,
		func(ctx context.Context, held time.Time, d time.Duration) (time.Time, bool, error) {
			return r.opts.Store.ExtendCheckClaim(ctx, ns, key, attempt, held, d)
		},
		func(ctx context.Context, held time.Time) (bool, error) {
			return r.opts.Store.ReleaseCheckClaim(ctx, ns, key, attempt, held)
		})
	req := n8n.NewCheckRequest(claimed)
	tries := r.opts.Tries
	if n := r.opts.TriesOf[name]; n > 0 {
		tries = n
	}
	var last n8n.CheckOutcome
	retry := callback.Retry{Initial: r.opts.Backoff, Max: 10 * time.Second, Tries: tries,
		Deadline: r.now().Add(r.opts.Claim * 3 / 4), Clock: r.now,
		Waiting: func(try int, wait time.Duration) {
			log.Info("check: no usable answer yet; trying again", "try", try, "detail", last.Answer.Detail, "wait", wait.String())
		}}
	out, stop := callback.Call(ctx, retry, func(ctx context.Context) (n8n.CheckOutcome, bool) {
		last = caller.Call(ctx, req)
		if ctx.Err() == nil {
			r.metrics.calls.WithLabelValues(callResult(last)).Inc()
		}
		return last, last.Retry
	})
	if stop == callback.Stopped {
		// Stopped: no answer is recorded. A check only reads, so the
		// claim is handed back and the next guard asks again at once.
		keeper.HandBack(ctx)
		return
	}
	keeper.Stop()
	r.record(ctx, log, claimed, out.Answer)
}

// record writes the check's answer; the store drops it when the key moved
// on meanwhile (a person decided, the holder reported late).
func (r *Runner) record(ctx context.Context, log *slog.Logger, rec *keystore.Record, a keystore.CheckAnswer) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, ok, err := r.opts.Store.CheckAnswered(wctx, rec.Namespace, rec.Key, rec.Attempt, a)
	switch {
	case err != nil:
		log.Warn("checks: the check's answer could not be recorded; the key is checked again once the claim lapses", "err", err)
		return
	case !ok:
		r.metrics.checks.WithLabelValues("superseded").Inc()
		log.Info("check: the key was decided meanwhile; the check's answer is dropped", "result", string(a.Result))
		return
	}
	switch a.Result {
	case keystore.CheckFound:
		r.metrics.checks.WithLabelValues("found").Inc()
		log.Info("check: the target has the record; the key is completed", "reference", a.Reference, "workflow", a.Workflow, "execution", a.Execution)
	case keystore.CheckAbsent:
		r.metrics.checks.WithLabelValues("absent").Inc()
		log.Info("check: the target has no record; the key failed and may be written again", "workflow", a.Workflow, "execution", a.Execution)
	default:
		r.metrics.checks.WithLabelValues("paged").Inc()
		log.Warn("check: no usable answer; the person is paged", "detail", a.Detail)
	}
}

func callResult(out n8n.CheckOutcome) string {
	switch {
	case out.Answer.Result == keystore.CheckFound, out.Answer.Result == keystore.CheckAbsent:
		return string(out.Answer.Result)
	case out.Retry:
		return "retry"
	}
	return "unusable"
}

type metrics struct {
	checks *prometheus.CounterVec
	calls  *prometheus.CounterVec
	held   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_checks_total",
			Help: "Keys decided by their check, by result: found (completed), absent (failed, retryable), paged (no usable answer: the person was paged), superseded (decided meanwhile; the answer was dropped)."}, []string{"result"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_check_calls_total",
			Help: "Calls of checks, by answer: found, absent, retry (5xx, 429, no answer), unusable."}, []string{"answer"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "n8n_guard_checks_waiting",
			Help: "Unknown keys whose page waits for their check."}),
	}
	for _, r := range []string{"found", "absent", "paged", "superseded"} {
		m.checks.WithLabelValues(r)
	}
	for _, a := range []string{"found", "absent", "retry", "unusable"} {
		m.calls.WithLabelValues(a)
	}
	if err := prom.Register(reg, m.checks, m.calls, m.held); err != nil {
		return nil, err
	}
	return m, nil
}
