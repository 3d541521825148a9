package catchup

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/prometheus/client_golang/prometheus"
)

// Store is what the runner needs of a store.
type Store interface {
	keystore.ParkStore
	keystore.CommitFeed // wakes the runner, the workers and the watches of resumed executions
	Lookup(ctx context.Context, namespace, key string) (keystore.Result, error)
	// List finds the decided keys of namespaces that require approval
	// (approval.go).
	List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error)
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
	// Poll is how often a resume call looks for a free slot while every
	// slot of its destination is held (default 250 ms).
	Poll  time.Duration
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

	mu      sync.Mutex
	workers map[string]bool
	overdue map[string]bool // parked attempts handed to the store as overdue (a cache: the store reports once)
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
		workers: map[string]bool{}, overdue: map[string]bool{}}, nil
}

// Run looks at the parked keys at each commit of the store (a key parked,
// a breaker closed) and every Interval until ctx ends, and starts a worker
// for each destination that has some.
func (r *Runner) Run(ctx context.Context) error {
	commits, stop := r.opts.Store.Commits()
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.runApprovals(ctx) // approval.go
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.runSweeps(ctx)
	}()
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		counts, err := r.opts.Store.ParkedCounts(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			r.log.Warn("catch-up: cannot count the parked keys; trying again", "err", err)
		default:
			r.metrics.setParked(counts)
			// The woken gauge is the store's count, as /v1/destinations shows it.
			if woken, err := r.opts.Store.WokenCounts(ctx); err == nil {
				r.metrics.setWoken(woken)
			}
			for dest, n := range counts {
				if n > 0 && r.startWorker(dest) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r.work(ctx, dest, n)
					}()
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-commits:
		case <-t.C:
		}
	}
}

func (r *Runner) startWorker(dest string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.workers[dest] {
		return false
	}
	r.workers[dest] = true
	return true
}

func (r *Runner) stopWorker(dest string) {
	r.mu.Lock()
	delete(r.workers, dest)
	r.mu.Unlock()
}

// work catches one destination up: it lists its parked keys oldest first
// and resumes them at the destination's pace until none is left.
func (r *Runner) work(ctx context.Context, dest string, parked int) {
	defer r.stopWorker(dest)
	commits, stop := r.opts.Store.Commits() // the probe's complete closes the breaker
	defer stop()
	dp := r.opts.Policies.Destination(dest)
	start := r.now()
	var (
		// announced: the outage was logged. Only once a listing finds a
		// key: a count reads no record, so a damaged one (skipped by every
		// listing, reported by the store) starts a worker every interval.
		announced bool
		mu        sync.Mutex
		inFlight  int
		resumed   int
		last      time.Time // when the last resume call took its turn (awaitTurn)
		done      = make(chan struct{}, dp.CatchUpConcurrency+1)
		wg        sync.WaitGroup
		pending   = map[string]bool{} // keys this worker is claiming or resuming
		refused   atomic.Bool         // a claim of this pass was refused
		lost      atomic.Int32        // parked executions n8n no longer held
		// lastOverdue: when the parked keys were last checked against
		// their parked_limit (zero: at the first pass).
		lastOverdue time.Time
	)
	defer wg.Wait()
	awaitTurn := func(rec *keystore.Record) (keystore.Turn, bool) {
		t, ok := r.awaitTurn(ctx, dest, rec)
		if ok {
			mu.Lock()
			last = r.now() // this guard's clock, as the local gate reads it (t.At may be the database's)
			mu.Unlock()
		}
		return t, ok
	}
	for ctx.Err() == nil {
		recs, err := r.opts.Store.Parked(ctx, keystore.ParkedQuery{Destination: dest, Limit: 4 * dp.CatchUpConcurrency})
		if err != nil {
			r.log.Warn("catch-up: cannot list the parked keys; trying again", "destination", dest, "err", err)
			r.opts.Sleep(ctx, r.opts.Interval)
			continue
		}
		mu.Lock()
		busy := inFlight
		mu.Unlock()
		if len(recs) > 0 && !announced {
			announced = true
			r.log.Warn("destination paused: events are parked in n8n and will be resumed when it is back",
				"destination", dest, "parked", parked)
		}
		if len(recs) == 0 && busy == 0 {
			if resumed > 0 || lost.Load() > 0 {
				took := r.now().Sub(start)
				r.metrics.caughtUp(dest, took)
				r.log.Info(keystore.CaughtUp(resumed, int(lost.Load()), took), "destination", dest,
					"resumed", resumed, "lost", lost.Load(), "took", took.Round(time.Millisecond).String())
			}
			return
		}
		if now := r.now(); now.Sub(lastOverdue) >= overdueEvery {
			lastOverdue = now
			r.reportOverdue(ctx, dest, now)
		}
		refused.Store(false)
		launched := 0
		for _, rec := range recs {
			if ctx.Err() != nil || refused.Load() {
				break
			}
			now := r.now()
			mu.Lock()
			mine := pending[rec.Key+"\x00"+rec.Namespace]
			mu.Unlock()
			if mine || rec.ResumeClaimUntil != nil && now.Before(*rec.ResumeClaimUntil) {
				continue // being resumed (by this guard or another)
			}
			// Wait for a slot and for the pace (the call itself waits for
			// its turn again: awaitTurn).
			for {
				mu.Lock()
				ok, wait := keystore.DecideCatchUpStart(r.now(), last, inFlight, dp)
				mu.Unlock()
				if ok {
					break
				}
				if wait == 0 {
					select {
					case <-done:
					case <-ctx.Done():
						return
					}
					continue
				}
				r.opts.Sleep(ctx, wait)
				if ctx.Err() != nil {
					return
				}
			}
			// The first claim of a pass is made here, so that after a
			// cooldown the oldest key becomes the probe; the others are
			// claimed by their goroutines, so the claims of several keys
			// share a commit (the store lets exactly one key be the probe
			// however many are claimed at once).
			var first *keystore.Record
			if launched == 0 {
				claimed, ok, err := r.opts.Store.ClaimResume(ctx, rec.Namespace, rec.Key, r.opts.Claim)
				if err != nil {
					r.log.Warn("catch-up: cannot claim a parked key; trying again", "destination", dest, "namespace", rec.Namespace, "key", rec.Key, "err", err)
				}
				if err != nil || !ok {
					refused.Store(true)
					break
				}
				first = claimed
			}
			mu.Lock()
			inFlight++
			pending[rec.Key+"\x00"+rec.Namespace] = true
			mu.Unlock()
			r.metrics.inFlight.WithLabelValues(dest).Inc()
			launched++
			wg.Add(1)
			go func(rec *keystore.Record) {
				defer wg.Done()
				claimed, ok, err := first, first != nil, error(nil)
				if first == nil {
					claimed, ok, err = r.opts.Store.ClaimResume(ctx, rec.Namespace, rec.Key, r.opts.Claim)
				}
				switch {
				case err != nil:
					r.log.Warn("catch-up: cannot claim a parked key; trying again", "destination", dest, "namespace", rec.Namespace, "key", rec.Key, "err", err)
					refused.Store(true)
				case !ok:
					// The breaker holds (cooldown, a probe out) or another
					// guard took it: look again after a while.
					refused.Store(true)
				default:
					t, ok := awaitTurn(claimed)
					if !ok {
						break
					}
					if r.resumeOne(ctx, claimed, &lost) {
						mu.Lock()
						resumed++
						mu.Unlock()
					}
					r.releaseTurn(ctx, dest, t)
				}
				mu.Lock()
				inFlight--
				delete(pending, rec.Key+"\x00"+rec.Namespace)
				mu.Unlock()
				r.metrics.inFlight.WithLabelValues(dest).Dec()
				select {
				case done <- struct{}{}:
				default: // the worker is not waiting; it looks again anyway
				}
			}(rec)
		}
		if refused.Load() || launched == 0 {
			select {
			case <-done:
			case <-ctx.Done():
			case <-commits:
			case <-time.After(r.opts.Interval):
			}
		}
	}
}

// awaitTurn waits until dest's next resume call may go and takes its turn
// in the store (keystore.DecideResumeTurn): the calls themselves are
// spaced (a claim that took longer than another cannot bunch two calls
// together), and the guards sharing the store keep one rate and one
// in-flight limit for the destination, the approval resumer's calls
// included. false: ctx ended, or no turn came free within rec's claim.
func (r *Runner) awaitTurn(ctx context.Context, dest string, rec *keystore.Record) (keystore.Turn, bool) {
	// A slot is held as long as this guard may count the call in flight:
	// the retries within the claim, then the woken bound (awaitFinish),
	// and its last wait to spare.
	hold := r.opts.Claim + r.wokenBound(rec.Namespace) + r.opts.Interval
	for ctx.Err() == nil {
		if rec.ResumeClaimUntil != nil && !r.now().Before(rec.ResumeClaimUntil.Add(-r.opts.Claim/4)) {
			// Waited for a turn until the claim nearly lapsed: the key is
			// claimed and tried again.
			r.log.Warn("catch-up: no resume turn came free within the claim; the key is tried again (other guards hold every slot of the destination, or a guard that died holds them until their hold ends)",
				"destination", dest, "namespace", rec.Namespace, "key", rec.Key, "hold", hold.String())
			return keystore.Turn{}, false
		}
		t, ok, wait, err := r.opts.Store.TakeResumeTurn(ctx, dest, hold)
		switch {
		case err != nil:
			r.log.Warn("catch-up: cannot take a resume turn; trying again", "destination", dest, "err", err)
			wait = r.opts.Interval
		case ok:
			if r.opts.paced != nil {
				r.opts.paced(dest, t.At)
			}
			return t, true
		case wait <= 0:
			wait = r.opts.Poll // every slot held, maybe by another guard
		}
		r.opts.Sleep(ctx, wait)
	}
	return keystore.Turn{}, false
}

// releaseTurn gives a turn's in-flight slot back; one not given back
// frees itself at its hold's end.
func (r *Runner) releaseTurn(ctx context.Context, dest string, t keystore.Turn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.opts.Store.ReleaseResumeTurn(rctx, t); err != nil {
		r.log.Warn("catch-up: a resume turn could not be released; its slot frees itself", "destination", dest, "until", t.Until, "err", err)
	}
}

// resumeOne calls the resume URL of a claimed key, with backoff while n8n
// is down or the execution has not reached its Wait node, within the
// claim; then it records the answer and, when n8n accepted, waits until
// the resumed execution finished (its slot counts until then). The claim
// is written before the call and the answer after it: a crash between
// n8n's answer and the write leaves the claim to lapse and the call to be
// made again, which n8n answers 409 or 404 when the execution already
// woke; and a woken execution reserves the key again, so no second write
// can come of it.
//
// The first execution of a catch-up found lost is logged; the others are
// counted in the caught-up line (each owner hears of each key in Slack).
func (r *Runner) resumeOne(ctx context.Context, rec *keystore.Record, lost *atomic.Int32) bool {
	dest, parkedAt := rec.Destination, *rec.ParkedAt
	// Retries end within the claim, a quarter of it to spare (a call may
	// take 15 s): after it lapses another guard may claim the key and call.
	deadline := r.now().Add(r.opts.Claim * 3 / 4)
	if rec.ResumeClaimUntil != nil {
		if d := rec.ResumeClaimUntil.Add(-r.opts.Claim / 4); d.Before(deadline) {
			deadline = d
		}
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 200*time.Millisecond, 10*time.Second
	var out n8n.ResumeOutcome
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		out = r.opts.Resumer.Resume(cctx, rec)
		cancel()
		r.metrics.resumes.WithLabelValues(dest, answerName(out.Answer)).Inc()
		if out.Answer != keystore.ResumeRetry || ctx.Err() != nil {
			break
		}
		wait := b.NextBackOff()
		if r.now().Add(wait).After(deadline) {
			r.log.Warn("catch-up: n8n did not take the resume call; the key stays parked and is tried again",
				"destination", dest, "namespace", rec.Namespace, "key", rec.Key, "detail", out.Detail)
			break
		}
		r.opts.Sleep(ctx, wait)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	got, err := r.opts.Store.ResumeAnswered(wctx, rec.Namespace, rec.Key, parkedAt, out.Answer, out.Detail)
	if err != nil {
		r.log.Warn("catch-up: n8n's answer to a resume call could not be recorded", "namespace", rec.Namespace, "key", rec.Key, "err", err)
	}
	switch out.Answer {
	case keystore.ResumeLost:
		if err != nil || got == nil || got.Reason != keystore.ReasonResumeLost {
			// Not recorded: the key moved on meanwhile. Several items of
			// one execution park behind one Wait node with one resume URL;
			// the call for one woke it, the others' calls find it finished
			// while their keys are reserved again by it.
			r.log.Info("catch-up: n8n no longer holds the execution, but the key moved on meanwhile (its execution was woken through another key parked with the same resume URL): nothing lost",
				"destination", dest, "namespace", rec.Namespace, "key", rec.Key, "detail", out.Detail)
			return false
		}
		r.metrics.lost.WithLabelValues(dest).Inc()
		if lost.Add(1) == 1 {
			r.log.Error("parked execution lost: n8n no longer holds it; its owner is told in Slack and must decide about the event (more of this catch-up are counted in its caught-up line)",
				"destination", dest, "namespace", rec.Namespace, "key", rec.Key, "detail", out.Detail)
		}
		return false
	case keystore.ResumeAccepted:
		if r.awaitFinish(ctx, rec) {
			lost.Add(1) // woken, then silent: lost, not resumed, in the caught-up line
			return false
		}
		return true
	}
	return false
}

// awaitFinish waits until the resumed execution reserved the key and
// finished its attempt, or the woken bound has passed: then an execution
// that never reserved is recorded lost (loseSilent), and lost is true.
// The key is looked up at each commit of the store (the execution's
// reserve and complete are commits) and every Interval (they may be
// another guard's).
func (r *Runner) awaitFinish(ctx context.Context, rec *keystore.Record) (lost bool) {
	bound := r.wokenBound(rec.Namespace)
	limit := r.now().Add(bound)
	commits, stop := r.opts.Store.Commits()
	defer stop()
	defer func() {
		if ctx.Err() != nil {
			return
		}
		if res, err := r.opts.Store.Lookup(ctx, rec.Namespace, rec.Key); err == nil && keystore.WokenSilent(res.Record, bound, r.now()) {
			lost = r.loseSilent(ctx, res.Record, bound)
		}
	}()
	for r.now().Before(limit) {
		// Looked up before the first wait: the execution may have
		// finished before the subscription.
		res, err := r.opts.Store.Lookup(ctx, rec.Namespace, rec.Key)
		switch cur := res.Record; {
		case ctx.Err() != nil:
			return
		case err != nil || cur == nil:
		case cur.State == keystore.StateReserved, cur.State == keystore.StateParked && cur.ResumeSentAt != nil:
			// woken, not finished
		default:
			return
		}
		r.wait(ctx, commits, r.opts.Interval)
	}
	return // the bound passed: the deferred look decides
}

// wait returns at a commit of the store (commits), after d (Sleep: the
// fallback for another guard's commits), or when ctx ends.
func (r *Runner) wait(ctx context.Context, commits <-chan struct{}, d time.Duration) {
	wctx, cancel := context.WithCancel(ctx)
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		r.opts.Sleep(wctx, d)
	}()
	select {
	case <-commits:
	case <-slept:
	}
	cancel()
	<-slept
}

// overdueEvery is how often a worker looks for keys parked longer than
// their namespace's parked_limit, and the runner for woken executions
// that went silent.
const overdueEvery = time.Minute

// wokenBound is how long a woken execution has to reserve its key again:
// a lease of its namespace and a claim (the time a resume call may take).
func (r *Runner) wokenBound(namespace string) time.Duration {
	return r.opts.Policies.Namespace(namespace).Lease + r.opts.Claim
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

// runSweeps looks for silent woken executions at start and every
// overdueEvery on the runner's clock (looked at every Interval) until ctx
// ends, beside the catch-up so a long listing delays no worker.
func (r *Runner) runSweeps(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	var swept time.Time
	for {
		if now := r.now(); now.Sub(swept) >= overdueEvery {
			swept = now
			r.sweepSilent(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepSilent finds, across every namespace, the parked keys whose woken
// execution went silent (keystore.WokenSilent) and records them lost:
// the watch of awaitFinish ends with its guard, the sweep does not (a
// guard restarted, another replica woke the key).
func (r *Runner) sweepSilent(ctx context.Context) {
	now := r.now()
	q := keystore.ListQuery{State: keystore.StateParked, Limit: 500}
	for ctx.Err() == nil {
		page, err := r.opts.Store.List(ctx, q)
		if err != nil {
			r.log.Warn("catch-up: cannot list the parked keys to find silent woken executions; trying again later", "err", err)
			return
		}
		for _, rec := range page.Items {
			if bound := r.wokenBound(rec.Namespace); keystore.WokenSilent(rec, bound, now) {
				r.loseSilent(ctx, rec, bound)
			}
		}
		if page.NextCursor == "" {
			return
		}
		q.Cursor = page.NextCursor
	}
}

// reportOverdue hands the store every parked key of dest that waited
// longer than its namespace's parked_limit. The store records each parked
// attempt's report once, with an event for its owner's Slack message
// (keystore.DecideParkedOverdue), whichever guard finds it first and
// however often it restarts; the map only spares repeated calls. One log
// line says how many were reported.
func (r *Runner) reportOverdue(ctx context.Context, dest string, now time.Time) {
	floor := keystore.DefaultParkedLimit
	for ns := range r.opts.Policies.Namespaces {
		floor = min(floor, r.opts.Policies.Namespace(ns).ParkedLimit)
	}
	q := keystore.ParkedQuery{Destination: dest, Limit: 500}
	reported := 0
	defer func() {
		if reported > 0 {
			r.log.Error("events parked longer than their namespace's parked_limit: their owners are told in Slack; a person must look at the destination",
				"destination", dest, "reported", reported)
		}
	}()
	for ctx.Err() == nil {
		recs, err := r.opts.Store.Parked(ctx, q)
		if err != nil || len(recs) == 0 {
			return
		}
		for _, rec := range recs {
			if rec.ParkedAt == nil {
				continue
			}
			if now.Sub(*rec.ParkedAt) < floor {
				return // oldest first: the rest parked later
			}
			limit := r.opts.Policies.Namespace(rec.Namespace).ParkedLimit
			id := rec.Namespace + "\x00" + rec.Key + "\x00" + rec.ParkedAt.String()
			r.mu.Lock()
			seen := r.overdue[id]
			r.mu.Unlock()
			if seen || now.Sub(*rec.ParkedAt) < limit {
				continue
			}
			ok, err := r.opts.Store.ParkedOverdue(ctx, rec.Namespace, rec.Key, *rec.ParkedAt, limit)
			if err != nil {
				r.log.Warn("catch-up: cannot record an overdue parked key; trying again", "destination", dest, "namespace", rec.Namespace, "key", rec.Key, "err", err)
				return
			}
			r.mu.Lock()
			r.overdue[id] = true
			r.mu.Unlock()
			if ok {
				reported++
				r.metrics.overdue.WithLabelValues(rec.Namespace).Inc()
			}
		}
		last := recs[len(recs)-1]
		q.AfterAt, q.AfterNamespace, q.AfterKey = *last.ParkedAt, last.Namespace, last.Key
	}
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

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
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
			Help: "Parked events whose execution n8n took the resume call for and that have not reserved their key again yet, by destination (the store's count, read every catch-up interval; past a lease and the claim they are recorded lost)."}, []string{"destination"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "n8n_guard_resumes_in_flight",
			Help: "Parked executions resumed and not finished yet, by destination (at most catch_up_concurrency)."}, []string{"destination"}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_resume_calls_total",
			Help: "Resume calls to n8n, by destination and answer (accepted, lost, retry)."}, []string{"destination", "answer"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_parked_lost_total",
			Help: "Parked executions n8n no longer held (404, 409 finished) or that went silent after waking: a person must decide, by destination."}, []string{"destination"}),
		overdue: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_parked_overdue_total",
			Help: "Events found parked longer than their namespace's parked_limit, by namespace."}, []string{"namespace"}),
		catchUp: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "n8n_guard_catch_up_seconds",
			Help:    "From the first parked event seen to the last one resumed, per outage, by destination.",
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

// setParked sets the gauge of every destination seen, 0 when none is left.
func (m *metrics) setParked(counts map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := range counts {
		m.seen[d] = true
	}
	for d := range m.seen {
		m.parked.WithLabelValues(d).Set(float64(counts[d]))
	}
}

// setWoken sets the woken gauge of every destination seen, 0 when none
// of its keys waits for its woken execution.
func (m *metrics) setWoken(counts map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := range counts {
		m.seen[d] = true
	}
	for d := range m.seen {
		m.woken.WithLabelValues(d).Set(float64(counts[d]))
	}
}

func (m *metrics) caughtUp(dest string, took time.Duration) {
	m.catchUp.WithLabelValues(dest).Observe(took.Seconds())
}
