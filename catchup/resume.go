package catchup

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/internal/callback"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// The one path of a resume, shared by the catch-up (worker.go) and the
// approvals (approval.go): claim the key in the store (the caller, each
// with its own log line), take a turn of its destination, call its resume
// URL with backoff and record n8n's answer, then give the turn back.

// outcome is what came of one resume, as the caught-up line counts it.
type outcome int

const (
	notResumed  outcome = iota // no claim, no turn, n8n did not take the call, or the key moved on
	finished                   // n8n took the call and the execution finished its attempt
	foundLost                  // n8n no longer held the execution: recorded lost, its owner told
	wokenSilent                // n8n took the call, the execution never reserved again: recorded lost (loseSilent logged it)
)

// resumeResult is one resume's report.
type resumeResult struct {
	rec     *keystore.Record
	outcome outcome
	detail  string // n8n's answer, for the log line of a lost execution
}

// resumeClaimed resumes the execution of a claimed key: it takes a turn
// of the key's destination (awaitTurn, pace.go), tells started when the
// call may go, calls and records (resumeOne, each further call taking a
// turn of its own) and gives the turn back. A key without a destination
// takes no turn.
//
// The claim is kept (calls.Keeper) from here until n8n's answer is
// recorded: extended whenever less than half a claim is left on the
// runner's clock, handed back when no call was made (ctx ended, no turn
// came free). A call in flight when ctx ends runs on for Grace (grace),
// and the claim is kept meanwhile.
func (r *Runner) resumeClaimed(ctx context.Context, claimed *keystore.Record, started func(at time.Time)) resumeResult {
	var pc *callPace
	ns, key := claimed.Namespace, claimed.Key
	grace, end := calls.Outlive(ctx, r.opts.Grace)
	defer end()
	keeper := r.claims.Keep(grace, r.log.With("namespace", ns, "key", key), claimed.ResumeClaimUntil,
		func(ctx context.Context, held time.Time, d time.Duration) (time.Time, bool, error) {
			return r.opts.Store.ExtendResumeClaim(ctx, ns, key, held, d)
		},
		func(ctx context.Context, held time.Time) (bool, error) {
			return r.opts.Store.ReleaseResumeClaim(ctx, ns, key, held)
		})
	if dest := claimed.Destination; dest != "" {
		t, ok := r.awaitTurn(ctx, r.turnRequest(claimed, nil), claimed)
		if !ok {
			keeper.HandBack(ctx) // not called: the key waits again at once
			return resumeResult{rec: claimed}
		}
		pc = &callPace{r: r, rec: claimed, turn: t}
		defer func() {
			pc.done()
			if ctx.Err() == nil {
				r.releaseTurn(ctx, dest, pc.turn)
			}
			// Stopping: the woken execution may still run, so its slot
			// stays held until its key is no longer resumed
			// (keystore.ResumeInFlight), whichever guard looks next.
		}()
	}
	started(r.now())
	return r.resumeOne(ctx, grace, claimed, pc, keeper)
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
// A call in flight when ctx ends (a stop) runs on under grace: n8n may
// already wake the execution, and its answer is recorded as any answer,
// so the key waits for no lapse. One answered "retry" after the stop
// (the grace cut it, or its own timeout did) may have reached n8n: its
// claim is neither answered nor handed back but left to lapse, so no
// guard calls the execution again before n8n had time to wake it. No
// call starts after ctx ended: a stop before the first call (its turn
// given ahead) hands the claim back, and a probe's with it; one during
// a backoff wait records the last answer, "retry".
//
// A lost execution is counted here and logged by the caller (logLost):
// the catch-up logs the first of an outage, the approvals each one.
func (r *Runner) resumeOne(ctx, grace context.Context, rec *keystore.Record, pc *callPace, keeper *calls.Keeper) resumeResult {
	dest, parkedAt := rec.Destination, *rec.ParkedAt
	// Retries end within the claim, a quarter of it to spare (a call may
	// take 15 s): after it lapses another guard may claim the key and call.
	deadline := r.now().Add(r.opts.Claim * 3 / 4)
	if rec.ResumeClaimUntil != nil {
		if d := rec.ResumeClaimUntil.Add(-r.opts.Claim / 4); d.Before(deadline) {
			deadline = d
		}
	}
	retry := callback.Retry{Initial: 200 * time.Millisecond, Max: 10 * time.Second,
		Deadline: deadline, Clock: r.now, Sleep: r.opts.Sleep}
	interrupted := false // the stop came while a call was in flight
	unmade := false      // the stop came before the first call
	out, stop := callback.Call(ctx, retry, func(ctx context.Context) (n8n.ResumeOutcome, bool) {
		if !pc.take(ctx) {
			return n8n.ResumeOutcome{Answer: keystore.ResumeRetry, Detail: "no resume turn came free within the claim"}, false
		}
		if ctx.Err() != nil { // the first call, its turn taken as the stop came (a turn given ahead)
			unmade = true
			pc.ended(ctx)
			return n8n.ResumeOutcome{Answer: keystore.ResumeRetry, Detail: "stopped before the call"}, false
		}
		cctx, cancel := context.WithTimeout(grace, keystore.ResumeCallTimeout)
		defer cancel()
		out := r.opts.Resumer.Resume(cctx, rec)
		// Unanswered when the stop came (cut by the grace, or by its own
		// timeout within it): n8n may have taken it.
		interrupted = ctx.Err() != nil
		pc.ended(ctx)
		r.metrics.resumes.WithLabelValues(dest, answerName(out.Answer)).Inc()
		return out, out.Answer == keystore.ResumeRetry
	})
	if unmade {
		// Nothing was asked of n8n: the claim goes back, and a probe's
		// with it, so the key waits for no lapse.
		keeper.HandBack(ctx)
		return resumeResult{rec: rec}
	}
	keeper.Stop()
	if stop == callback.PastDeadline {
		r.log.Warn("catch-up: n8n did not take the resume call; the key stays parked and is tried again",
			"destination", dest, "namespace", rec.Namespace, "key", rec.Key, "detail", out.Detail)
	}
	if interrupted && out.Answer == keystore.ResumeRetry {
		r.log.Warn("catch-up: stopped while a resume call was in flight, and n8n gave no answer within the grace; n8n may have taken it, so the key's claim is left to lapse before any guard calls it again",
			"destination", dest, "namespace", rec.Namespace, "key", rec.Key, "grace", r.opts.Grace.String(), "claim", r.opts.Claim.String())
		return resumeResult{rec: rec}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	got, err := r.opts.Store.ResumeAnswered(wctx, rec.Namespace, rec.Key, parkedAt, out.Answer, out.Detail)
	if err != nil {
		r.log.Warn("catch-up: n8n's answer to a resume call could not be recorded", "namespace", rec.Namespace, "key", rec.Key, "err", err)
	}
	res := resumeResult{rec: rec, detail: out.Detail}
	switch out.Answer {
	case keystore.ResumeLost:
		if err != nil || got == nil || got.Reason != keystore.ReasonResumeLost {
			// Not recorded: the key moved on meanwhile. Several items of
			// one execution park behind one Wait node with one resume URL;
			// the call for one woke it, the others' calls find it finished
			// while their keys are reserved again by it.
			r.log.Info("catch-up: n8n no longer holds the execution, but the key moved on meanwhile (its execution was woken through another key parked with the same resume URL): nothing lost",
				"destination", dest, "namespace", rec.Namespace, "key", rec.Key, "detail", out.Detail)
			return res
		}
		r.metrics.lost.WithLabelValues(dest).Inc()
		res.outcome = foundLost
	case keystore.ResumeAccepted:
		res.outcome = finished
		if r.awaitFinish(ctx, rec) {
			res.outcome = wokenSilent // lost, not resumed, in the caught-up line
		}
	}
	return res
}

// logLost says that n8n no longer held a parked execution.
func (r *Runner) logLost(rec *keystore.Record, detail string) {
	r.log.Error("parked execution lost: n8n no longer holds it; its owner is told in Slack and must decide about the event (more of this catch-up are counted in its caught-up line)",
		"destination", rec.Destination, "namespace", rec.Namespace, "key", rec.Key, "detail", detail)
}

// awaitFinish waits until the resumed execution reserved the key and
// finished its attempt, or the woken bound has passed: then an execution
// that never reserved is recorded lost (loseSilent), and lost is true.
// The key is looked up by a calls.Loop, at each commit of the key in this
// process's store (the execution's reserve and complete) and every
// Interval (they may be another guard's); the first look is before any
// wait: the execution may have finished before the subscription.
func (r *Runner) awaitFinish(ctx context.Context, rec *keystore.Record) (lost bool) {
	bound := r.wokenBound(rec.Namespace)
	limit := r.now().Add(bound)
	wctx, over := context.WithCancel(ctx)
	defer over()
	commits := keystore.CommitsOf(r.opts.Store, func(k keystore.CommittedKey) bool {
		return k.Namespace == rec.Namespace && k.Key == rec.Key
	})
	calls.Loop{Commits: commits, Interval: r.opts.Interval, Sleep: r.opts.Sleep}.Run(wctx, func(ctx context.Context) ([]calls.Call, time.Duration) {
		if !r.now().Before(limit) {
			over() // the bound passed: the look below decides
			return nil, 0
		}
		res, err := r.opts.Store.Lookup(ctx, rec.Namespace, rec.Key)
		switch cur := res.Record; {
		case ctx.Err() != nil, err != nil || cur == nil:
		case keystore.PhaseOf(cur) == keystore.PhaseLost:
			// Recorded lost by another look (the sweep for silent woken
			// executions, on this guard or another, or a late answer):
			// lost in the caught-up line, not resumed.
			lost = true
			over()
		case cur.State == keystore.StateReserved, cur.State == keystore.StateParked && cur.ResumeSentAt != nil:
			// woken, not finished
		default:
			over()
		}
		return nil, 0
	})
	if ctx.Err() != nil || lost {
		return lost
	}
	res, err := r.opts.Store.Lookup(ctx, rec.Namespace, rec.Key)
	switch {
	case err != nil:
	case keystore.PhaseOf(res.Record) == keystore.PhaseLost:
		lost = true // recorded lost meanwhile (the sweep for silent executions came first)
	case keystore.WokenSilent(res.Record, bound, r.now()):
		// Not recorded by this look when the sweep came between the
		// lookup and the record: lost all the same.
		lost = r.loseSilent(ctx, res.Record, bound) || r.recordedLost(ctx, rec)
	}
	return lost
}

// recordedLost: rec's key is recorded lost now (by any look).
func (r *Runner) recordedLost(ctx context.Context, rec *keystore.Record) bool {
	res, err := r.opts.Store.Lookup(ctx, rec.Namespace, rec.Key)
	return err == nil && keystore.PhaseOf(res.Record) == keystore.PhaseLost
}
