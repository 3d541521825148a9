// Package rerun re-runs n8n executions that stopped at their re-run gate
// once a person allowed it (keystore/rerun.go): at a bounded pace per
// destination and at most Options.Reads asks of n8n's API a second in
// all, each execution once, and it records what n8n said on every
// key the execution carries.
//
// The store is the queue: a granted key that no re-run has started is
// pending, so a restart loses nothing. A guard claims a re-run in the
// store before it asks n8n (keystore's ClaimRerunHeld), so of several
// replicas one asks, and keeps the claim while n8n is asked (calls.Keeper
// extends it), so it never lapses under a call in flight: one grant, one
// retry. A guard that stops before it asked hands its claims back, and
// the keys may be claimed again at once; a claim left by a guard that
// died (or whose ask n8n did not answer) lapses and is taken up again, as
// is a started re-run that never reserved the key. Even a re-run started
// twice writes nothing twice: the re-run's gate reserves the key, and
// only one reserve wins. Its loop is calls', woken by the commits of
// granted keys (keystore.CommitsOf).
package rerun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// GateNodePrefix begins the name of every re-run gate `n8n guard` adds:
// the guard re-runs only an execution that stopped at a node so named
// (n8n.Rerunner), and Slack says what such a failure asks of a person.
const GateNodePrefix = "n8n-guard: re-run gate for "

// Executions starts an n8n execution of a workflow again (n8n.Rerunner).
// keys are the keys the re-run is for: the execution must have reserved
// each of them (a key's holder is whatever its reserve's token wrote, so
// it may name any execution); it is retried for those it did reserve.
// A retry n8n started at or after since (the grant) is this re-run's: n8n
// is not asked again (Retried.Earlier), so a guard that stopped after
// asking and before noting n8n's answer makes no second retry of one
// grant. Asked under a stop that came before its retry was asked (ctx
// made by calls.Outlive: calls.Stopped), it asks n8n nothing that acts
// and answers calls.ErrStopped.
type Executions interface {
	Retry(ctx context.Context, workflowID, executionID string, keys []Key, since time.Time) (Retried, error)
}

// Key names one key of a re-run.
type Key struct{ Namespace, Key string }

// Retried is what came of a retry: n8n's new execution (ID; "" when none
// started) and the keys the execution never reserved (NotOwn, whose
// holder named it anyway), which are refused for Why while the others
// re-run.
type Retried struct {
	ID     string
	NotOwn []Key
	Why    string
	// Earlier: n8n had started this re-run already, asked by a guard that
	// stopped (or lost n8n's answer) before it noted it; not asked again.
	Earlier bool
	// Unchecked: n8n did not let the guard look for an earlier ask (its
	// API key lacks the execution:list scope), so after a guard stopped
	// while n8n answered, one grant may make two retries (the gate still
	// writes once).
	Unchecked bool
}

// Refused is n8n's refusal of a retry (a 4xx: not found, not failed,
// unauthorized), or the guard's own (the execution did not stop at a
// gate): the keys say so, and a person may try again. Any other error
// (n8n unreachable, a 5xx, an execution still running) leaves the re-run
// pending.
type Refused struct {
	Status  int
	Message string // n8n's words
}

func (e *Refused) Error() string { return fmt.Sprintf("HTTP %d %s", e.Status, e.Message) }

// ErrOff refuses a re-run on a guard without n8n's API (no Runner):
// the API, the console and the bulk decisions answer it alike.
var ErrOff = errs.Errorf(errs.Unsupported, "this guard cannot re-run n8n executions: set N8N_API_URL and N8N_API_KEY (a key with the execution:read, execution:list and execution:retry scopes), or allow a retry without re-run; nothing changed")

// ErrUnreachable marks an error of Executions that says n8n could not be
// reached at all (refused, timed out): the round ends, since every other
// re-run would wait for it too. Any other error is about one execution
// (still running, a 5xx for it) and holds back only that one.
var ErrUnreachable = errors.New("n8n unreachable")

// Options configure a Runner. Zero values take the defaults named.
type Options struct {
	// Pace is the least time between two re-runs that write to the same
	// destination (2 s).
	Pace time.Duration
	// Interval is how often the store is searched for pending re-runs
	// besides this process's commits of granted keys, Kick and the claims
	// in flight (10 min): a grant another replica made and did not start.
	Interval time.Duration
	// Claim: a claim its guard no longer keeps (it died) is taken again
	// after this (2 min); Started: a re-run n8n started that has not
	// reserved the key after this is asked again (10 min). Started also
	// bounds one ask of n8n (its claim is kept meanwhile): an ask
	// unanswered that long is as n8n not answering, and a hung connection
	// does not hold its destination's re-runs for ever.
	Claim, Started time.Duration
	// Grace is how long a stop waits for a call to n8n already in flight
	// (n8n may have started the retry: its answer is noted, so the grant
	// is not asked again); a call that outlives it is cut (10 s).
	Grace time.Duration
	// Reads caps the re-runs asked of n8n's API a second, whatever their
	// destinations (2; negative: no cap). Each asks for the whole
	// execution (its data, to check where it stopped and which keys it
	// reserved), a heavy read for n8n; the pace per destination alone let
	// 300 invented destinations make 15 such reads a second.
	Reads float64
	// Name is who claims re-runs in the keys' history ("n8n-guard").
	Name       string
	Logger     *slog.Logger
	Clock      keystore.Clock
	Registerer prometheus.Registerer
	// Sleep waits d or until ctx ends (default: a timer): the wait for
	// the next read, on Clock's time.
	Sleep func(ctx context.Context, d time.Duration)
}

// DefaultReads is the default of Options.Reads: n8n API reads a second.
const DefaultReads = 2

func (o Options) withDefaults() Options {
	o.Pace = cmp.Or(max(o.Pace, 0), 2*time.Second)
	o.Interval = cmp.Or(max(o.Interval, 0), 10*time.Minute)
	o.Claim = cmp.Or(max(o.Claim, 0), 2*time.Minute)
	o.Started = cmp.Or(max(o.Started, 0), 10*time.Minute)
	o.Grace = cmp.Or(max(o.Grace, 0), calls.DefaultGrace)
	o.Name = cmp.Or(o.Name, "n8n-guard")
	o.Reads = cmp.Or(o.Reads, DefaultReads)
	if o.Sleep == nil {
		o.Sleep = calls.Sleep
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Runner starts the granted re-runs.
type Runner struct {
	store   keystore.Store
	n8n     Executions
	opts    Options
	kick    chan struct{}
	reads   *rate.Limiter // nil: no cap
	results *prometheus.CounterVec
	waiting prometheus.Gauge

	// Written by the loop's goroutine alone: its look, and each call's
	// Begin and Ended (call); a call's own goroutine touches none.
	last map[string]time.Time // destination → its last re-run's start (n8n's answer)
	down time.Time            // until then n8n is not asked: it did not answer at all
	// probed: the half-open destinations (pausedID) whose probe a look
	// gave, until when the others wait for it.
	probed map[string]time.Time
}

// New makes a Runner; Run starts it.
func New(store keystore.Store, n8n Executions, opts Options) (*Runner, error) {
	r := &Runner{store: store, n8n: n8n, opts: opts.withDefaults(), kick: make(chan struct{}, 1), last: map[string]time.Time{}, probed: map[string]time.Time{},
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_reruns_total",
			Help: "Re-runs of n8n executions a person allowed, by what n8n answered (started; found: started by an earlier ask whose answer was not noted; refused; failed: n8n did not answer, tried again)."}, []string{"result"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "n8n_guard_reruns_pending",
			Help: "Executions whose re-run a person allowed and no guard has started, at the last search, besides those whose destination is paused (alert when it stays above 0)."}),
	}
	if r.opts.Reads > 0 {
		// In bursts of a second's worth: a round of a few re-runs asks
		// at once, a long one at the cap.
		r.reads = rate.NewLimiter(rate.Limit(r.opts.Reads), max(int(r.opts.Reads), 1))
	}
	if err := prom.Register(r.opts.Registerer, r.results, r.waiting); err != nil {
		return nil, err
	}
	return r, nil
}

// Kick makes Run look for pending re-runs now (a grant was made).
func (r *Runner) Kick() {
	if r == nil {
		return
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run starts pending re-runs until ctx ends (calls.Loop: woken by the
// commits that may bring one, by Kick, and every Interval), one at a
// time, the oldest grant first.
func (r *Runner) Run(ctx context.Context) { r.loop().Run(ctx, r.look) }

// loop is the re-runs' loop: woken by the commits wakesRuns matches alone,
// so a busy store's other writes do not make it read the granted keys.
func (r *Runner) loop() calls.Loop {
	return calls.Loop{Commits: keystore.CommitsOf(r.store, wakesRuns), Wake: r.kick, Interval: r.opts.Interval}
}

// wakesRuns matches the commits that may bring a re-run to start: a key
// granted (a person's grant, a claim handed back) and a breaker alone (a
// destination a person paused or reopened: its re-runs wait or go). Not
// the loop's own claims and notes, nor n8n's started re-runs: a claim in
// flight and a started re-run are looked at again when they go stale
// (look's next), without a commit.
func wakesRuns(k keystore.CommittedKey) bool {
	return k.Stage == keystore.StageGranted || k.Key == ""
}

// execution is one pending re-run: the execution to retry, the gate its
// keys' workflow stopped at (the keys' holder) and the keys.
type execution struct {
	workflow, id string
	gate         string
	destination  string
	keys         []*keystore.Record
}

// look reads the pending re-runs and makes a call of the oldest grant of
// each destination whose pace allows one now (the loop runs one call of
// a destination at a time), and says when to look again: when a claim
// in flight goes stale, a paused destination may be back, or a
// destination's pace allows its next re-run (0: Interval). After n8n did
// not answer at all it asks nothing until a claim has passed: every
// re-run would wait for it.
func (r *Runner) look(ctx context.Context) ([]calls.Call, time.Duration) {
	now := r.opts.Clock()
	if down := r.down.Sub(now); down > 0 {
		return nil, down
	}
	pending, soon, err := r.pending(ctx)
	if err != nil {
		r.opts.Logger.Error("re-runs: cannot read the pending re-runs; trying again", "err", err, "in", r.opts.Claim)
		return nil, r.opts.Claim
	}
	if len(pending) > 0 {
		soon = sooner(soon, r.opts.Started) // a re-run started now is looked at again then
	}
	pending, back := r.withoutPaused(ctx, pending)
	r.waiting.Set(float64(len(pending)))
	soon = sooner(soon, back)
	var out []calls.Call
	seen := map[string]bool{}
	for _, ex := range pending {
		if seen[ex.destination] {
			continue
		}
		seen[ex.destination] = true
		// The pace runs from n8n's answer: two re-runs of one
		// destination are asked at least Pace apart.
		if due := r.last[ex.destination].Add(r.opts.Pace); now.Before(due) {
			soon = sooner(soon, due.Sub(now))
			continue
		}
		out = append(out, r.call(ex))
	}
	return out, soon
}

// call is ex's re-run as a call of the loop: Begin drops it, and the
// look's later ones, once n8n did not answer an earlier one (every re-run
// would wait for it); Run starts it (start) and says when to look again,
// when the destination's pace allows its next re-run or a claim has
// passed after n8n did not answer; Ended notes when n8n answered, for
// the pace, and its outage.
func (r *Runner) call(ex *execution) calls.Call {
	var result started
	var at time.Time // Run's, read by Ended after it
	return calls.Call{Key: ex.destination,
		Begin: func(context.Context) (run, more bool) {
			up := !r.down.After(r.opts.Clock())
			return up, up
		},
		Run: func(ctx context.Context) time.Duration {
			result = r.start(ctx, ex)
			at = r.opts.Clock()
			if result == unreachable {
				return r.opts.Claim
			}
			return r.opts.Pace
		},
		Ended: func() {
			r.last[ex.destination] = at
			if result == unreachable {
				// The others would wait for n8n too. Their grants stay; this
				// claim goes stale and is taken again.
				r.down = at.Add(r.opts.Claim)
			}
		}}
}

// withoutPaused leaves out the re-runs whose destination is paused for
// them (keystore.PauseOf: its breaker open for all or for their namespace
// alone, or a maintenance window): a re-run's gate would meet
// destination_paused, which ends the re-run without a write and without
// stopping at the gate. A half-open destination takes one re-run, whose
// gate is its probe, when no probe is in flight; the others wait for the
// probe. They stay granted; back is when to look again (0: nothing
// waits).
func (r *Runner) withoutPaused(ctx context.Context, pending []*execution) ([]*execution, time.Duration) {
	if len(pending) == 0 {
		return pending, 0
	}
	list, err := r.store.Destinations(ctx)
	if err != nil {
		r.opts.Logger.Warn("re-runs: cannot read the destinations' breakers; starting the re-runs anyway", "err", err)
		return pending, 0
	}
	breakers := make(map[string]*keystore.Breaker, len(list))
	for i := range list {
		breakers[list[i].Destination] = &list[i]
	}
	now := r.opts.Clock()
	const probeLook = 30 * time.Second // a probe's write usually ends sooner than its lease
	var back time.Duration
	waiting := map[string]int{}
	out := pending[:0]
	for _, ex := range pending {
		p := keystore.PauseOf(breakers[ex.destination], ex.keys[0].Namespace, now)
		id := pausedID(ex.destination, p.Namespace)
		switch {
		case p.State == keystore.BreakerClosed:
			out = append(out, ex)
			continue
		case p.State == keystore.BreakerHalfOpen && p.Until.IsZero() && !now.Before(r.probed[id]):
			r.probed[id] = now.Add(probeLook) // this re-run's gate is the probe; the others wait for it
			out = append(out, ex)
			continue
		case p.State == keystore.BreakerHalfOpen:
			// Its probe in flight (or the one an earlier look gave) is
			// looked at again within probeLook.
			p.Until = cmp.Or(p.Until, r.probed[id])
			if look := now.Add(probeLook); look.Before(p.Until) {
				p.Until = look
			}
		}
		waiting[ex.destination]++
		back = sooner(back, max(p.Until.Sub(now), time.Second))
	}
	for dest, n := range waiting {
		r.opts.Logger.Info("re-runs wait for their destination: it is paused (for all, or for their namespace), or its probe runs", "destination", dest, "executions", n)
	}
	return out, back
}

// pausedID names a destination's pause: for every namespace (ns ""), or
// for ns alone.
func pausedID(dest, ns string) string { return dest + "\x00" + ns }

// pendingStages are the stages of a granted re-run (keystore/stage.go):
// the round reads their keys from the stage index, never a failed key
// that no person allowed to re-run.
var pendingStages = []keystore.Stage{keystore.StageGranted, keystore.StageStarting, keystore.StageStarted}

// pending reads the granted keys that no guard is starting, one execution
// each, the oldest grant first, and when the soonest claim in flight goes
// stale (0: none is in flight).
func (r *Runner) pending(ctx context.Context) ([]*execution, time.Duration, error) {
	now := r.opts.Clock()
	var soon time.Duration
	byRun := map[string]*execution{}
	var out []*execution
	add := func(rec *keystore.Record) {
		gate, granted := keystore.RerunGranted(rec)
		at, _ := keystore.RerunClaimableAt(rec, r.opts.Claim, r.opts.Started)
		if d := at.Sub(now); !granted || d > 0 {
			// Moved on since the stage was read, or claimed (or started)
			// and not stale until d.
			soon = sooner(soon, max(d, 0))
			return
		}
		wf, id := keystore.ExecutionOf(gate)
		if t := keystore.LastTransition(rec); t.Event == keystore.HistoryRerunStarted {
			// n8n started it, and it never reserved the key (its gate
			// met a paused destination, or it is gone): ask again, for
			// the execution n8n started.
			id = t.Detail
			r.opts.Logger.Warn("re-run: the execution n8n started has not reserved the key; asking again",
				"namespace", rec.Namespace, "key", rec.Key, "execution", id, "after", r.opts.Started)
		}
		run := wf + "\x00" + id
		ex := byRun[run]
		if ex == nil {
			ex = &execution{workflow: wf, id: id, gate: gate, destination: rec.Destination}
			byRun[run] = ex
			out = append(out, ex)
		}
		ex.keys = append(ex.keys, rec)
	}
	for _, stage := range pendingStages {
		for rec, err := range keystore.AtStage(ctx, r.store, keystore.StageQuery{Stage: stage, Limit: 1000}) {
			if err != nil {
				return nil, 0, err
			}
			add(rec)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return grantedAt(out[i]).Before(grantedAt(out[j])) })
	return out, soon, nil
}

func grantedAt(ex *execution) time.Time {
	if r := ex.keys[0]; r.ResolvedAt != nil {
		return *r.ResolvedAt
	}
	return time.Time{}
}

// started is what came of one start.
type started int

const (
	done        started = iota // started, refused, or not this guard's to start
	later                      // this execution is asked again when its claim goes stale
	unreachable                // n8n did not answer at all: the round ends
)

// start claims the re-run, allows it for the execution's other keys that
// wait at the same gate (a re-run re-runs every item of it: one left at
// the gate would fail it for all), asks n8n and notes the answer on each
// key (answered). The claims of all the keys are kept together (claims.go) from the
// last claim (the steps before are the store's writes, far inside a
// claim) until n8n's answer: a claim never goes stale while its guard
// waits for n8n, however long n8n takes (up to Started), the ask is cut
// before they lapse when the store refuses their extension, and a guard
// that stops before it asked hands them all back; one that stops while
// n8n is asked waits for its answer (up to Grace) and notes it.
func (r *Runner) start(ctx context.Context, ex *execution) started {
	log := r.opts.Logger.With("workflow", ex.workflow, "execution", ex.id, "destination", ex.destination)
	first := ex.keys[0]
	held := &claims{r: r}
	if ok, err := held.claim(ctx, first); err != nil || !ok {
		if err != nil {
			log.Error("re-run: cannot claim it; trying again", "key", first.Key, "err", err)
			return later
		}
		return done // another guard has it, or the grant is gone
	}
	if ex.workflow == "" || ex.id == "" {
		r.refuse(ctx, log, held.keys, `the key's holder "`+ex.gate+`" names no n8n workflow and execution`)
		return done
	}
	more, err := r.grantSiblings(ctx, ex)
	for _, rec := range append(ex.keys[1:], more...) {
		held.claim(ctx, rec) // a key not claimed is another guard's, or moved on
	}
	claimed := held.keys
	if ctx.Err() != nil {
		// Stopped while the siblings were allowed (a store that ends its
		// reads with the context says so as an error): nothing was asked
		// and nothing refused; the claims go back, and the grant waits
		// for the next guard.
		held.keep(ctx, log).HandBack(ctx)
		return later
	}
	if err != nil {
		r.refuse(ctx, log, claimed, "another event of the same execution could not be allowed, so a re-run would stop at its gate: "+err.Error())
		return done
	}
	// An ask made outlives a stop by Grace, and its claims are kept
	// meanwhile: n8n may start the retry, and its answer noted is what
	// keeps the grant from a second ask.
	grace, end := calls.Outlive(ctx, r.opts.Grace)
	defer end()
	keeper := held.keep(grace, log)
	r.awaitRead(ctx)
	if ctx.Err() != nil {
		// Stopped before n8n was asked: the keys wait for no lapse.
		keeper.HandBack(ctx)
		return later
	}
	// The ask never outlives the claims that hold it: cut when they are
	// about to lapse (the store refused their extension), or a second
	// guard could claim the grant and ask n8n again.
	within, stop := keeper.Within(grace)
	defer stop()
	call, cancel := context.WithTimeout(within, r.opts.Started)
	defer cancel()
	res, err := r.n8n.Retry(call, ex.workflow, ex.id, keysOf(claimed), grantedAt(ex))
	if errors.Is(err, calls.ErrStopped) {
		// Stopped while n8n was read, before the retry was asked: the
		// keys wait for no lapse.
		keeper.HandBack(ctx)
		return later
	}
	keeper.Stop() // n8n was asked: the claims stay until its answer is noted, or lapse
	return r.answered(ctx, log, claimed, res, err, context.Cause(call))
}

// answered notes n8n's answer to the retry of claimed (err; cause: why
// the ask's context ended, if it did) on each key, and what came of it.
func (r *Runner) answered(ctx context.Context, log *slog.Logger, claimed []*keystore.Record, res Retried, err, cause error) started {
	if len(res.NotOwn) > 0 {
		// Keys of another namespace's execution, or forged: refused; the
		// execution's own keys are re-run.
		own := func(rec *keystore.Record) bool {
			return !slices.Contains(res.NotOwn, Key{Namespace: rec.Namespace, Key: rec.Key})
		}
		r.refuse(ctx, log, slices.DeleteFunc(slices.Clone(claimed), own), res.Why)
		if claimed = slices.DeleteFunc(claimed, func(rec *keystore.Record) bool { return !own(rec) }); len(claimed) == 0 {
			return done
		}
	}
	var refused *Refused
	switch {
	case err == nil && res.Earlier:
		// A guard asked before and stopped, or lost n8n's answer, before
		// it noted it: the grant has its one retry.
		r.note(ctx, claimed, keystore.HistoryRerunStarted, res.ID)
		r.results.WithLabelValues("found").Inc()
		log.Warn("re-run found started: n8n re-ran the execution already for this grant (the guard that asked stopped before noting it); not asked again", "as", res.ID, "keys", len(claimed))
	case err == nil:
		// Counted before it is noted: whoever sees the note sees the count.
		r.results.WithLabelValues("started").Inc()
		r.note(ctx, claimed, keystore.HistoryRerunStarted, res.ID)
		log.Info("re-run started", "as", res.ID, "keys", len(claimed))
		if res.Unchecked {
			log.Warn("re-run: n8n's API key may not list executions (scope execution:list), so the guard could not check that no earlier ask of this grant started it; give the key execution:list")
		}
	case errors.As(err, &refused):
		r.refuse(ctx, log, claimed, "n8n refused the re-run: "+refused.Message)
	case errors.Is(cause, calls.ErrGraceOver):
		// n8n may start the retry all the same: the claims lapse, and
		// the next ask finds it (Retried.Earlier).
		r.results.WithLabelValues("failed").Inc()
		log.Warn("re-run: stopped while n8n was asked, and n8n did not answer within the grace; the claims lapse before the grant is asked again", "err", err, "grace", r.opts.Grace, "in", r.opts.Claim)
		return later
	case errors.Is(err, ErrUnreachable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(cause, calls.ErrLapsing):
		r.results.WithLabelValues("failed").Inc()
		log.Error("re-run not started: n8n did not answer; the grants stay, asked again", "err", err, "in", r.opts.Claim)
		return unreachable
	default:
		r.results.WithLabelValues("failed").Inc()
		log.Warn("re-run not started yet: n8n cannot re-run this execution now; the grant stays, asked again, the other re-runs go on", "err", err, "in", r.opts.Claim)
		return later
	}
	return done
}

// awaitRead waits for the n8n API's next read (Options.Reads), on the
// runner's clock. The runs of a round are started one after another, so
// one wait is at most 1/Reads; the claims are kept meanwhile.
func (r *Runner) awaitRead(ctx context.Context) {
	if r.reads == nil {
		return
	}
	now := r.opts.Clock()
	if d := r.reads.ReserveN(now, 1).DelayFrom(now); d > 0 {
		r.opts.Sleep(ctx, d)
	}
}

// sooner is the sooner of two waits, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func keysOf(recs []*keystore.Record) []Key {
	keys := make([]Key, len(recs))
	for i, rec := range recs {
		keys[i] = Key{Namespace: rec.Namespace, Key: rec.Key}
	}
	return keys
}

func (r *Runner) refuse(ctx context.Context, log *slog.Logger, keys []*keystore.Record, why string) {
	r.results.WithLabelValues("refused").Inc()
	r.note(ctx, keys, keystore.HistoryRerunRefused, why)
	log.Warn("re-run refused; the keys stay failed and say why, and a person may allow it again", "why", why, "keys", len(keys))
}

// grantSiblings allows the re-run, in the first key's person's name, for
// the keys of the same namespaces whose execution waits at the same gate;
// an error when one of them cannot be allowed.
func (r *Runner) grantSiblings(ctx context.Context, ex *execution) ([]*keystore.Record, error) {
	first := ex.keys[0]
	note := cut("re-run with "+first.Key+", the same execution: "+first.Note, keystore.MaxNoteLength)
	seen := map[string]bool{}
	var out []*keystore.Record
	for _, k := range ex.keys {
		if seen[k.Namespace] {
			continue
		}
		seen[k.Namespace] = true
		allowed, _, err := Grant(ctx, r.store, ex.gate, k.Namespace, first.ResolvedBy, note)
		out = append(out, allowed...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Keys is the part of the keystore a grant goes through.
type Keys interface {
	List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error)
	Resolve(ctx context.Context, req keystore.ResolveRequest) (keystore.Result, error)
}

// Grant allows the re-run, in by's name with note, of the failed keys
// whose execution holder waits at its re-run gate, in namespace ns (""
// every namespace): the keys it allowed, how many were allowed already
// (their re-run pending), and the first error other than a key decided
// meanwhile (the other keys are allowed all the same). The caller wakes
// the Runner (Kick) when it allowed any.
func Grant(ctx context.Context, keys Keys, holder, ns, by, note string) (allowed []*keystore.Record, already int, err error) {
	q := keystore.ListQuery{Namespace: ns, Owner: holder, State: keystore.StateFailed, Limit: 1000}
	for rec, lerr := range keystore.Listed(ctx, keys, q) {
		if lerr != nil {
			return allowed, already, cmp.Or(err, lerr)
		}
		if h, granted := keystore.RerunGranted(rec); granted {
			if h == holder {
				already++
			}
			continue
		}
		if keystore.RerunHolder(rec) != holder {
			continue
		}
		res, rerr := keys.Resolve(ctx, keystore.ResolveRequest{Namespace: rec.Namespace, Key: rec.Key, Resolution: keystore.StateFailed,
			Rerun: true, By: by, Note: note, Attempt: rec.Attempt})
		switch {
		case errs.CodeOf(rerr) == errs.Conflict: // decided meanwhile: no longer at the gate
		case rerr != nil:
			err = cmp.Or(err, fmt.Errorf("key %s: %w", rec.Key, rerr))
		default:
			allowed = append(allowed, res.Record)
		}
	}
	return allowed, already, err
}

// note writes an answer given already (n8n's, or the guard's refusal) on
// each key. It outlives ctx: a guard told to stop as n8n answers still
// notes the answer, which PostgreSQL would refuse on an ended context, or
// the grant would lapse into a second ask of n8n.
func (r *Runner) note(ctx context.Context, keys []*keystore.Record, event keystore.HistoryEvent, detail string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, rec := range keys {
		noted, err := r.store.NoteRerun(ctx, rec.Namespace, rec.Key, event, detail)
		switch {
		case err != nil:
			r.opts.Logger.Error("re-run: cannot note n8n's answer on the key", "namespace", rec.Namespace, "key", rec.Key, "event", event, "detail", detail, "err", err)
		case !noted:
			r.opts.Logger.Info("re-run: the key moved on before n8n's answer was noted (the re-run reserved it already, or a person decided); not noted",
				"namespace", rec.Namespace, "key", rec.Key, "event", event, "detail", detail)
		}
	}
}

// cut cuts s to at most n characters.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
