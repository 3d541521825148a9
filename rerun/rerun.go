// Package rerun re-runs n8n executions that stopped at their re-run gate
// once a person allowed it (keystore/rerun.go): at a bounded pace per
// destination, each execution once, and it records what n8n said on every
// key the execution carries.
//
// The store is the queue: a granted key that no re-run has started is
// pending, so a restart loses nothing, and a re-run started twice (a
// crash between n8n's answer and the note) writes nothing twice either:
// the re-run's gate reserves the key, and only one reserve wins.
package rerun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// GateNodePrefix begins the name of every re-run gate `n8n guard` adds:
// the guard re-runs only an execution that stopped at a node so named
// (n8n.Rerunner), and Slack says what such a failure asks of a person.
const GateNodePrefix = "n8n-guard: re-run gate for "

// Executions starts an n8n execution again (n8n.Retrier): the new
// execution's id, or the refusal.
type Executions interface {
	Retry(ctx context.Context, executionID string) (string, error)
}

// Refused is n8n's refusal of a retry (a 4xx: not found, not failed,
// running, unauthorized): the keys say so, and a person may try again.
// Any other error (n8n unreachable, a 5xx) leaves the re-run pending.
type Refused struct {
	Status  int
	Message string // n8n's words
}

func (e *Refused) Error() string { return fmt.Sprintf("HTTP %d %s", e.Status, e.Message) }

// Options configure a Runner. Zero values take the defaults named.
type Options struct {
	// Pace is the least time between two re-runs that write to the same
	// destination (2 s).
	Pace time.Duration
	// Interval is how often the store is searched for pending re-runs
	// besides Kick (1 min): another replica's grants, n8n back after an
	// outage.
	Interval   time.Duration
	Logger     *slog.Logger
	Clock      keystore.Clock
	Registerer prometheus.Registerer
}

func (o Options) withDefaults() Options {
	o.Pace = cmp.Or(max(o.Pace, 0), 2*time.Second)
	o.Interval = cmp.Or(max(o.Interval, 0), time.Minute)
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
	started *prometheus.CounterVec
}

// New makes a Runner; Run starts it.
func New(store keystore.Store, n8n Executions, opts Options) (*Runner, error) {
	r := &Runner{store: store, n8n: n8n, opts: opts.withDefaults(), kick: make(chan struct{}, 1),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n8n_guard_reruns_total",
			Help: "Re-runs of n8n executions a person allowed, by what n8n answered (started, refused, failed: n8n did not answer, tried again)."}, []string{"result"})}
	if err := prom.Register(r.opts.Registerer, r.started); err != nil {
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

// Run starts pending re-runs until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	last := map[string]time.Time{} // destination → its last re-run's start
	for {
		r.round(ctx, last)
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-t.C:
		}
	}
}

// execution is one pending re-run: the execution that waits at its gate
// and the keys it carries.
type execution struct {
	holder, id  string
	destination string
	keys        []*keystore.Record
}

// round starts every pending re-run, each destination at its pace.
func (r *Runner) round(ctx context.Context, last map[string]time.Time) {
	pending, err := r.pending(ctx)
	if err != nil {
		r.opts.Logger.Error("re-runs: cannot read the pending re-runs; trying again", "err", err)
		return
	}
	for len(pending) > 0 && ctx.Err() == nil {
		now := r.opts.Clock()
		var wait time.Duration = -1
		rest := pending[:0]
		for _, ex := range pending {
			if due := last[ex.destination].Add(r.opts.Pace); now.Before(due) {
				if d := due.Sub(now); wait < 0 || d < wait {
					wait = d
				}
				rest = append(rest, ex)
				continue
			}
			last[ex.destination] = now
			r.start(ctx, ex)
			now = r.opts.Clock()
		}
		pending = rest
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// holderRE reads the execution from a holder as the guard's workflows
// write it: "n8n <workflow> exec <id>".
var holderRE = regexp.MustCompile(`(?i)^n8n\s+(?:[A-Za-z0-9_-]{1,64}\s+)?exec(?:ution)?\s*[:#]?\s*([A-Za-z0-9_-]{1,64})$`)

// ExecutionOf is the n8n execution id a holder names ("" : none).
func ExecutionOf(holder string) string {
	if m := holderRE.FindStringSubmatch(strings.TrimSpace(holder)); m != nil {
		return m[1]
	}
	return ""
}

// pending reads the granted keys that no re-run has started, one
// execution per holder, the oldest grant first.
func (r *Runner) pending(ctx context.Context) ([]*execution, error) {
	byHolder := map[string]*execution{}
	var out []*execution
	q := keystore.ListQuery{State: keystore.StateFailed, Limit: 1000}
	for {
		page, err := r.store.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, rec := range page.Items {
			holder, granted := keystore.RerunGranted(rec)
			if !granted || keystore.RerunStartedAs(rec) != "" {
				continue
			}
			key := rec.Namespace + "\x00" + holder
			ex := byHolder[key]
			if ex == nil {
				ex = &execution{holder: holder, id: ExecutionOf(holder), destination: rec.Destination}
				byHolder[key] = ex
				out = append(out, ex)
			}
			ex.keys = append(ex.keys, rec)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	sort.SliceStable(out, func(i, j int) bool { return grantedAt(out[i]).Before(grantedAt(out[j])) })
	return out, nil
}

func grantedAt(ex *execution) time.Time {
	if r := ex.keys[0]; r.ResolvedAt != nil {
		return *r.ResolvedAt
	}
	return time.Time{}
}

// start grants the execution's other keys that wait at the same gate (a
// re-run re-runs every item of it: one left ungranted would fail the gate
// for all), asks n8n to retry it and notes the answer on each key.
func (r *Runner) start(ctx context.Context, ex *execution) {
	log := r.opts.Logger.With("execution", ex.id, "destination", ex.destination, "keys", len(ex.keys))
	if ex.id == "" {
		r.note(ctx, ex, keystore.HistoryRerunRefused, "the key's holder "+quote(ex.holder)+" names no n8n execution")
		r.started.WithLabelValues("refused").Inc()
		log.Warn("re-run refused: the holder names no n8n execution", "holder", ex.holder)
		return
	}
	r.grantSiblings(ctx, ex)
	newID, err := r.n8n.Retry(ctx, ex.id)
	var refused *Refused
	switch {
	case err == nil:
		r.note(ctx, ex, keystore.HistoryRerunStarted, newID)
		r.started.WithLabelValues("started").Inc()
		log.Info("re-run started", "as", newID)
	case errors.As(err, &refused):
		r.note(ctx, ex, keystore.HistoryRerunRefused, "n8n refused the re-run: "+err.Error())
		r.started.WithLabelValues("refused").Inc()
		log.Warn("re-run refused by n8n; the keys stay failed and say so", "err", err)
	default:
		r.started.WithLabelValues("failed").Inc()
		log.Error("re-run not started: n8n did not answer; trying again", "err", err, "in", r.opts.Interval)
	}
}

// grantSiblings grants the re-run, in the first key's person's name, to
// the keys of the same namespace whose execution waits at the same gate.
func (r *Runner) grantSiblings(ctx context.Context, ex *execution) {
	first := ex.keys[0]
	q := keystore.ListQuery{Namespace: first.Namespace, Owner: ex.holder, State: keystore.StateFailed, Limit: 1000}
	page, err := r.store.List(ctx, q)
	if err != nil {
		r.opts.Logger.Warn("re-run: cannot list the other keys of the execution", "execution", ex.id, "err", err)
		return
	}
	for _, rec := range page.Items {
		if keystore.RerunHolder(rec) != ex.holder {
			continue
		}
		res, err := r.store.Resolve(ctx, keystore.ResolveRequest{Namespace: rec.Namespace, Key: rec.Key, Resolution: keystore.StateFailed,
			Rerun: true, By: first.ResolvedBy, Note: "re-run with " + first.Key + ", the same execution: " + first.Note, Attempt: rec.Attempt})
		if err != nil {
			r.opts.Logger.Warn("re-run: cannot grant another key of the execution; the re-run may stop at its gate", "execution", ex.id, "key", rec.Key, "err", err)
			continue
		}
		ex.keys = append(ex.keys, res.Record)
	}
}

func (r *Runner) note(ctx context.Context, ex *execution, event keystore.HistoryEvent, detail string) {
	for _, rec := range ex.keys {
		if _, err := r.store.NoteRerun(ctx, rec.Namespace, rec.Key, event, detail); err != nil {
			r.opts.Logger.Error("re-run: cannot note n8n's answer on the key", "key", rec.Key, "event", event, "err", err)
		}
	}
}

func quote(s string) string { return `"` + s + `"` }
