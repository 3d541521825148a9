package catchup

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// work catches one destination up (Run starts it, as a call of its loop,
// for each destination that has parked keys and no worker): a calls.Loop
// whose looks list the destination's parked keys longest waiting first
// (by their first parking) and whose calls resume them, no more at once
// than the destination has slots, until none is left.
func (r *Runner) work(ctx context.Context, dest string, parked int) {
	ctx, end := context.WithCancel(ctx)
	defer end()
	dp := r.opts.Policies.Destination(dest)
	w := &worker{r: r, dest: dest, dp: dp, parked: parked, end: end, inFlight: map[string]bool{}, probes: map[string]bool{}}
	// The pace is the store's turn alone (pace.go): the slots only keep
	// the worker from claiming a key whose call could not take a turn
	// soon. A resume's end wakes the next look (a probe's closes the
	// breaker); a refused claim holds the loop off the store's commits.
	calls.Loop{Commits: r.opts.Store, Interval: r.opts.Interval, Slots: max(dp.CatchUpConcurrency, 1),
		LookAtEnds: true, Held: func() bool { return w.refused }}.Run(ctx, w.look)
}

// A worker catches one destination up: it lists the destination's parked
// keys longest waiting first and resumes them at its pace until none is left.
//
// Its state is written by its loop's goroutine only: the look, and each
// resume's begin and ended (calls.Loop runs them there). A resume's
// goroutine writes only its own resume's result, which ended reads once
// the loop took its end.
type worker struct {
	// Set when the worker is made, never written after.
	r      *Runner
	dest   string
	dp     keystore.DestinationPolicy
	parked int                // the count that started the worker, for the first log line
	end    context.CancelFunc // ends the loop: caught up

	// The pass and the resumes; written by the loop's goroutine only.
	inFlight map[string]bool // the keys (id) of the resumes begun and not ended
	probes   map[string]bool // those of them claimed first in a pass while the breaker was not closed
	begun    int             // resumes begun in this look's pass
	refused  bool            // a claim of this pass was refused: the pass ends

	// The outage, for its log lines; written by the loop's goroutine only.
	// announced: the outage was logged. Only once a listing finds a key:
	// a count reads no record, so a damaged one (skipped by every listing,
	// reported by the store) starts a worker every interval.
	announced   bool
	resumed     int
	lost        int       // executions n8n no longer held, or woken and silent
	lastOverdue time.Time // when the keys were last held to their parked_limit (zero: at the first pass)
	// overdue: the parked attempts (namespace, key, wait start) the last
	// pass handed to the store as overdue (reportOverdue).
	overdue map[string]bool
	// closedAt: when this worker found its destination's breaker closed
	// since it was last seen open (the probe's complete, a person's
	// reset; at its first pass when it was closed already): the
	// catch-up's start, as the outage's Slack message counts it from the
	// breaker's close (noteClosed).
	closedAt time.Time
}

func id(rec *keystore.Record) string { return rec.Key + "\x00" + rec.Namespace }

// look is one pass of the worker: list the parked keys, close the outage
// when none is left and no resume is in flight, and find a resume for
// each listed key that no guard resumes yet (the loop starts them while
// the destination has a slot, until a claim is refused).
//
// The keys are listed by the start of their wait (Record.WaitingSince),
// not by parked_at: a probe whose woken execution found the destination
// still down parks again with a new parked_at and keeps its wait, so it
// is the probe again after the next cooldown, the event that has waited
// longest. QueuedStages (waiting, claimed) are the keys Parked lists:
// parked, not resumed, not lost, not in the approval life cycle.
func (w *worker) look(ctx context.Context) ([]calls.Call, time.Duration) {
	recs, err := w.r.opts.Store.ParkedByWait(ctx, keystore.WaitQuery{Destination: w.dest, Stages: keystore.QueuedStages, Limit: 4 * w.dp.CatchUpConcurrency})
	if err != nil {
		w.r.log.Warn("catch-up: cannot list the parked keys; trying again", "destination", w.dest, "err", err)
		return nil, 0
	}
	w.announce(len(recs))
	w.noteClosed(ctx)
	if len(recs) == 0 && len(w.inFlight) == 0 {
		w.caughtUp()
		w.end()
		return nil, 0
	}
	if now := w.r.now(); now.Sub(w.lastOverdue) >= overdueEvery {
		w.lastOverdue = now
		w.reportOverdue(ctx, now)
	}
	w.begun, w.refused = 0, false
	var out []calls.Call
	// mayProbe: no older key of this pass is being claimed by this guard.
	// While the breaker is not closed, none may be while a key resumed by
	// this guard is missing from the listing either: its probe, woken, may
	// park again (its write found the destination still down) and be the
	// oldest waiting key again by the time a claim of this pass is made.
	listed := 0
	for _, rec := range recs {
		if w.probes[id(rec)] {
			listed++
		}
	}
	mayProbe := !w.closedAt.IsZero() || listed == len(w.probes)
	for _, rec := range recs {
		if w.inFlight[id(rec)] {
			// Being resumed by this guard, or its claim still in flight
			// (and maybe refused): no younger key may become the probe
			// before it.
			mayProbe = false
			continue
		}
		if rec.ResumeClaimUntil != nil && w.r.now().Before(*rec.ResumeClaimUntil) {
			continue // being resumed by another guard
		}
		rs := &resume{w: w, rec: rec, mayProbe: mayProbe}
		out = append(out, calls.Call{Key: id(rec), Begin: rs.begin, Run: rs.run, Ended: rs.ended})
	}
	return out, 0
}

// A resume is one call of the worker. claimed is written by begin, on
// the loop's goroutine, before run's goroutine starts; refused and
// result by run, read by ended once the loop took its end.
type resume struct {
	w        *worker
	rec      *keystore.Record // as listed
	mayProbe bool             // no older key of its pass is being claimed by this guard
	claimed  *keystore.Record // the first claim of the pass, made by begin
	refused  bool             // its claim was refused or failed
	result   resumeResult
}

// begin runs when the resume has a slot; its call waits for the store's
// turn (awaitTurn). The first claim of a pass is made here, so that
// after a cooldown the oldest key becomes the probe; the others are
// claimed by their goroutines, so the claims of several keys share a
// commit. Those are never the probe (ClaimResumeBehind): they are
// refused while the breaker is not closed, and the next pass claims the
// oldest waiting key alone, also after a lost probe freed the
// destination while they were in flight.
func (rs *resume) begin(ctx context.Context) (run, more bool) {
	w := rs.w
	if w.refused {
		return false, false // refused since the look (a claim behind the first)
	}
	if w.begun == 0 && rs.mayProbe {
		if rs.claimed = w.r.claim(ctx, rs.rec, false); rs.claimed == nil {
			if !w.dp.Admits(rs.rec.Namespace) {
				// The claim recorded it lost (keystore.DecideClaimResume):
				// no refusal of the destination, the next key may probe.
				return false, true
			}
			w.refused = true
			return false, false
		}
	}
	w.begun++
	w.inFlight[id(rs.rec)] = true
	if rs.claimed != nil && w.closedAt.IsZero() {
		w.probes[id(rs.rec)] = true
	}
	w.r.metrics.inFlight.WithLabelValues(w.dest).Inc()
	return true, true
}

// run claims the key (unless begin did) and resumes it (resumeClaimed),
// in a goroutine of its own: it touches none of the worker's state.
func (rs *resume) run(ctx context.Context) time.Duration {
	defer rs.w.r.metrics.inFlight.WithLabelValues(rs.w.dest).Dec()
	claimed := rs.claimed
	if claimed == nil {
		if claimed = rs.w.r.claim(ctx, rs.rec, true); claimed == nil {
			rs.refused = true
			return 0
		}
	}
	rs.result = rs.w.r.resumeClaimed(ctx, claimed, func(time.Time) {})
	return 0
}

// ended takes the resume's result into the worker's state. The first
// execution of an outage found lost is logged; the others are counted in
// the caught-up line (each owner hears of each key in Slack).
func (rs *resume) ended() {
	w := rs.w
	delete(w.inFlight, id(rs.rec))
	delete(w.probes, id(rs.rec))
	w.refused = w.refused || rs.refused
	switch rs.result.outcome {
	case finished:
		w.resumed++
	case foundLost:
		if w.lost++; w.lost == 1 {
			w.r.logLost(rs.result.rec, rs.result.detail)
		}
	case wokenSilent:
		w.lost++
	}
}

func (w *worker) announce(listed int) {
	if listed > 0 && !w.announced {
		w.announced = true
		w.r.log.Warn("destination paused: events are parked in n8n and will be resumed when it is back",
			"destination", w.dest, "parked", w.parked)
	}
}

// noteClosed notes when the destination's breaker was last seen closed
// after being open (each pass looks: the probe's complete is a commit,
// which wakes the pass). A breaker that opens again during the catch-up
// (a resumed write found the destination down) starts it anew: its took
// counts from the last close, as the new outage's Slack message does. A
// namespace paused alone leaves it closed: its catch-up counts from the
// worker's first pass.
func (w *worker) noteClosed(ctx context.Context) {
	brs, err := w.r.opts.Store.Destinations(ctx)
	if err != nil {
		return // looked at again at the next pass
	}
	now := w.r.now()
	for _, b := range brs {
		if b.Destination == w.dest && b.View(now).State != keystore.BreakerClosed {
			w.closedAt = time.Time{}
			return
		}
	}
	if w.closedAt.IsZero() {
		w.closedAt = now
	}
}

// caughtUp writes the outage's closing line, if anything came of it: the
// catch-up took from the breaker's close to the last resume's end
// (keystore.CatchUpTook). The same figures go to the event log
// (keystore.EventCaughtUp), from which notify takes the took of the
// outage's Slack message, so both say one figure.
func (w *worker) caughtUp() {
	if w.resumed == 0 && w.lost == 0 {
		return
	}
	took := keystore.CatchUpTook(w.closedAt, w.r.now())
	w.r.metrics.caughtUp(w.dest, took)
	w.r.log.Info(keystore.CaughtUp(w.resumed, w.lost, took), "destination", w.dest,
		"resumed", w.resumed, "lost", w.lost, "took", took.Round(time.Millisecond).String())
	// Its own bounded context: a guard stopping right now still writes
	// the end of a catch-up that is over.
	ctx, cancel := context.WithTimeout(context.Background(), w.r.opts.Interval+10*time.Second)
	defer cancel()
	if err := w.r.opts.Store.RecordCaughtUp(ctx, w.dest, w.resumed, w.lost, took); err != nil {
		w.r.log.Warn("catch-up: cannot record that the destination is caught up; its outage message is closed by the parked counts instead", "destination", w.dest, "err", err)
	}
}

// claim claims a parked key's resume call: the first of a pass
// (ClaimResume, which may make it the probe) or one behind it
// (ClaimResumeBehind, never the probe). nil: refused (the breaker holds:
// a cooldown, a probe out; or another guard took it) or failed; the key
// is looked at again after a while.
func (r *Runner) claim(ctx context.Context, rec *keystore.Record, behind bool) *keystore.Record {
	claim := r.opts.Store.ClaimResume
	if behind {
		claim = r.opts.Store.ClaimResumeBehind
	}
	claimed, ok, err := claim(ctx, rec.Namespace, rec.Key, r.opts.Claim)
	if err != nil {
		r.log.Warn("catch-up: cannot claim a parked key; trying again", "destination", rec.Destination, "namespace", rec.Namespace, "key", rec.Key, "err", err)
	}
	if err != nil || !ok {
		return nil
	}
	return claimed
}
