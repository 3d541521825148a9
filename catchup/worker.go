package catchup

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// work catches one destination up (Run starts it for each destination
// that has parked keys and no worker).
func (r *Runner) work(ctx context.Context, dest string, parked int) {
	defer r.stopWorker(dest)
	dp := r.opts.Policies.Destination(dest)
	w := &worker{r: r, dest: dest, dp: dp, parked: parked,
		events: make(chan report, max(dp.CatchUpConcurrency, 1)), pending: map[string]bool{}}
	w.run(ctx)
}

// A worker catches one destination up: it lists the destination's parked
// keys oldest first and resumes them at its pace until none is left.
//
// Its state is its own: each resume runs in a goroutine (resumeParked)
// that shares nothing with the worker but the reports it sends on events,
// which the worker's loop reads.
type worker struct {
	// Set when the worker is made, never written after.
	r      *Runner
	dest   string
	dp     keystore.DestinationPolicy
	parked int // the count that started the worker, for the first log line
	// events: the resume goroutines' reports, room for one of each (its
	// end), so that a goroutine never waits for the loop.
	events chan report

	// The resumes started; written by run's goroutine only. The pace is
	// the store's turn alone (pace.go): the worker only keeps no more
	// resumes going than the destination has slots, so that it claims no
	// key whose call could not take a turn soon.
	inFlight int             // resumes started and not reported ended
	pending  map[string]bool // their keys (id)
	refused  bool            // a claim of this pass was refused: the pass ends
	freed    bool            // a resume ended since the loop last waited for one

	// The outage, for its log lines; written by run's goroutine only.
	// announced: the outage was logged. Only once a listing finds a key:
	// a count reads no record, so a damaged one (skipped by every listing,
	// reported by the store) starts a worker every interval.
	announced   bool
	resumed     int
	lost        int       // executions n8n no longer held, or woken and silent
	lastOverdue time.Time // when the keys were last held to their parked_limit (zero: at the first pass)
	// closedAt: when this worker first found its destination's breaker
	// closed (the probe's complete, a person's reset; at its first pass
	// when it was closed already): the catch-up's start, as the outage's
	// Slack message counts it from the breaker's close.
	closedAt time.Time
}

// report is a resume goroutine's message to its worker: it ended, with
// what came of it.
type report struct {
	id      string
	refused bool // its claim was refused or failed
	result  resumeResult
}

func id(rec *keystore.Record) string { return rec.Key + "\x00" + rec.Namespace }

// run is the worker's loop: list the parked keys, close the outage when
// none is left and no resume is in flight, start the resumes this pass's
// pace allows, then wait for a resume to end, a commit or a tick. It
// returns when the destination is caught up or ctx ended, once every
// resume it started has reported its end.
func (w *worker) run(ctx context.Context) {
	commits, stop := w.r.opts.Store.Commits() // the probe's complete closes the breaker
	defer stop()
	defer w.drain()
	for ctx.Err() == nil {
		recs, err := w.r.opts.Store.Parked(ctx, keystore.ParkedQuery{Destination: w.dest, Limit: 4 * w.dp.CatchUpConcurrency})
		if err != nil {
			w.r.log.Warn("catch-up: cannot list the parked keys; trying again", "destination", w.dest, "err", err)
			w.r.opts.Sleep(ctx, w.r.opts.Interval)
			continue
		}
		w.collect()
		w.announce(len(recs))
		w.noteClosed(ctx)
		if len(recs) == 0 && w.inFlight == 0 {
			w.caughtUp()
			return
		}
		if now := w.r.now(); now.Sub(w.lastOverdue) >= overdueEvery {
			w.lastOverdue = now
			w.r.reportOverdue(ctx, w.dest, now)
		}
		if launched := w.startPass(ctx, recs); w.refused || launched == 0 {
			w.await(ctx, commits)
		}
	}
}

// startPass starts a resume for each listed key that no guard resumes yet,
// while the destination has a slot for it, until a claim is refused or
// ctx ends; it returns how many it started.
func (w *worker) startPass(ctx context.Context, recs []*keystore.Record) (launched int) {
	w.refused = false
	mayProbe := true // no older key of this pass is being claimed by this guard
	for _, rec := range recs {
		if w.collect(); ctx.Err() != nil || w.refused {
			break
		}
		if w.pending[id(rec)] {
			// Being resumed by this guard, or its claim still in flight
			// (and maybe refused): no younger key may become the probe
			// before it.
			mayProbe = false
			continue
		}
		if rec.ResumeClaimUntil != nil && w.r.now().Before(*rec.ResumeClaimUntil) {
			continue // being resumed by another guard
		}
		// Room for one more resume; its call waits for the store's turn
		// (awaitTurn).
		if !w.awaitRoom(ctx) {
			break
		}
		// The first claim of a pass is made here, so that after a
		// cooldown the oldest key becomes the probe; the others are
		// claimed by their goroutines, so the claims of several keys
		// share a commit. Those are never the probe (ClaimResumeBehind):
		// they are refused while the breaker is not closed, and the
		// next pass claims the oldest waiting key alone, also after a
		// lost probe freed the destination while they were in flight.
		var first *keystore.Record
		if launched == 0 && mayProbe {
			if first = w.r.claimParked(ctx, rec); first == nil {
				if !w.dp.Admits(rec.Namespace) {
					// The claim recorded it lost (keystore.DecideClaimResume):
					// no refusal of the destination, the next key may probe.
					continue
				}
				w.refused = true
				break
			}
		}
		w.inFlight++
		w.pending[id(rec)] = true
		w.r.metrics.inFlight.WithLabelValues(w.dest).Inc()
		launched++
		go resumeParked(ctx, w.r, w.dest, rec, first, w.events)
	}
	return launched
}

// awaitRoom waits until fewer resumes of the worker are going than the
// destination has slots; false: ctx ended. It is no pace: the calls keep
// the rate and the slots in the store's turn, with every guard's.
func (w *worker) awaitRoom(ctx context.Context) bool {
	for w.collect(); w.inFlight >= max(w.dp.CatchUpConcurrency, 1); {
		select {
		case rep := <-w.events:
			w.apply(rep)
			w.freed = false // this wait was for it
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// await waits for a resume to end, a commit of the store, the Interval
// (the fallback for another guard's commits) or ctx's end; not at all
// when a resume ended since the loop last waited for one. After a refused
// claim it does not wait for commits: the breaker holds the destination
// (its cooldown, a window, another guard's probe), and this guard's own
// probe reports on its channel; a busy store's commits would otherwise
// have it list and claim again at each one.
func (w *worker) await(ctx context.Context, commits <-chan struct{}) {
	defer func() { w.freed = false }()
	if w.freed {
		return
	}
	if w.refused {
		commits = nil
	}
	t := time.NewTimer(w.r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case rep := <-w.events:
			w.apply(rep)
			return
		case <-ctx.Done():
			return
		case <-commits:
			return
		case <-t.C:
			return
		}
	}
}

// collect applies the reports that arrived, without waiting.
func (w *worker) collect() {
	for {
		select {
		case rep := <-w.events:
			w.apply(rep)
		default:
			return
		}
	}
}

// apply takes one resume's report into the worker's state. The first
// execution of an outage found lost is logged; the others are counted in
// the caught-up line (each owner hears of each key in Slack).
func (w *worker) apply(rep report) {
	w.inFlight--
	delete(w.pending, rep.id)
	w.freed = true
	w.refused = w.refused || rep.refused
	switch rep.result.outcome {
	case finished:
		w.resumed++
	case foundLost:
		if w.lost++; w.lost == 1 {
			w.r.logLost(rep.result.rec, rep.result.detail)
		}
	case wokenSilent:
		w.lost++
	}
}

// drain waits until every resume the worker started reported its end.
func (w *worker) drain() {
	for w.inFlight > 0 {
		w.apply(<-w.events)
	}
}

func (w *worker) announce(listed int) {
	if listed > 0 && !w.announced {
		w.announced = true
		w.r.log.Warn("destination paused: events are parked in n8n and will be resumed when it is back",
			"destination", w.dest, "parked", w.parked)
	}
}

// noteClosed notes when the destination's breaker was first seen closed
// (each pass looks until then: the probe's complete is a commit, which
// wakes the pass). A namespace paused alone leaves it closed: its
// catch-up counts from the worker's first pass.
func (w *worker) noteClosed(ctx context.Context) {
	if !w.closedAt.IsZero() {
		return
	}
	brs, err := w.r.opts.Store.Destinations(ctx)
	if err != nil {
		return // looked at again at the next pass
	}
	now := w.r.now()
	for _, b := range brs {
		if b.Destination == w.dest && b.View(now).State != keystore.BreakerClosed {
			return
		}
	}
	w.closedAt = now
}

// caughtUp writes the outage's closing line, if anything came of it: the
// catch-up took from the breaker's close to the last resume's end
// (keystore.CatchUpTook), the span the outage's Slack message gives.
func (w *worker) caughtUp() {
	if w.resumed == 0 && w.lost == 0 {
		return
	}
	took := keystore.CatchUpTook(w.closedAt, w.r.now())
	w.r.metrics.caughtUp(w.dest, took)
	w.r.log.Info(keystore.CaughtUp(w.resumed, w.lost, took), "destination", w.dest,
		"resumed", w.resumed, "lost", w.lost, "took", took.Round(time.Millisecond).String())
}

// resumeParked is one resume of the catch-up, in a goroutine of its own:
// it claims rec (unless the worker did: first), resumes it
// (resumeClaimed) and reports on events when it ended. It touches none
// of the worker's state.
func resumeParked(ctx context.Context, r *Runner, dest string, rec, first *keystore.Record, events chan<- report) {
	end := report{id: id(rec)}
	defer func() {
		r.metrics.inFlight.WithLabelValues(dest).Dec()
		events <- end
	}()
	claimed := first
	if claimed == nil {
		if claimed = r.claimBehind(ctx, rec); claimed == nil {
			end.refused = true
			return
		}
	}
	end.result = r.resumeClaimed(ctx, claimed, func(time.Time) {})
}

// claimBehind claims the resume call of a parked key behind the first
// of a pass (never the probe: ClaimResumeBehind); nil as claimParked.
func (r *Runner) claimBehind(ctx context.Context, rec *keystore.Record) *keystore.Record {
	claimed, ok, err := r.opts.Store.ClaimResumeBehind(ctx, rec.Namespace, rec.Key, r.opts.Claim)
	if err != nil {
		r.log.Warn("catch-up: cannot claim a parked key; trying again", "destination", rec.Destination, "namespace", rec.Namespace, "key", rec.Key, "err", err)
	}
	if err != nil || !ok {
		return nil
	}
	return claimed
}

// claimParked claims a parked key's resume call. nil: refused (the
// breaker holds: a cooldown, a probe out; or another guard took it) or
// failed; the key is looked at again after a while.
func (r *Runner) claimParked(ctx context.Context, rec *keystore.Record) *keystore.Record {
	claimed, ok, err := r.opts.Store.ClaimResume(ctx, rec.Namespace, rec.Key, r.opts.Claim)
	if err != nil {
		r.log.Warn("catch-up: cannot claim a parked key; trying again", "destination", rec.Destination, "namespace", rec.Namespace, "key", rec.Key, "err", err)
	}
	if err != nil || !ok {
		return nil
	}
	return claimed
}
