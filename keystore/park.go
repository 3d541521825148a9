package keystore

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Parking: an event whose destination is paused waits in n8n (a Wait node
// set to resume "On Webhook Call") instead of being dropped, and the guard
// resumes it when the destination is back. The key is recorded as parked
// with the resume URL the execution gave; never with the payload.
//
//	reserve with resume_url, breaker paused  -> parked (outcome parked; a copy of a parked key: parked, no write)
//	fail destination_* with resume_url, breaker not closed after it -> parked
//	parked, not woken, breaker not closed    -> reserve answers parked (copies, early wakes by anyone else)
//	parked, breaker closed or woken          -> reserve: reserved (accepted, attempt+1) through the breaker
//	claim resume (the catch-up runner)       -> parked + claim; the first after a cooldown is the breaker's probe
//	resume answered by n8n                   -> parked + resume_sent_at (the execution will reserve again)
//	resume lost (404, finished)              -> parked, reason resume_lost: a person decides; never resumed again
//	parked and lost, reserve (a re-send)     -> through the breaker: reserved, or parked anew (queued) with its resume_url
//	complete (a parked attempt's old token)  -> conflict; resolve: like failed
//
// A key is woken when a guard claimed its resume call: from then on its
// reserve goes through to the breaker, which lets the probe's own key pass.

// DefaultParkedLimit is how long a key may stay parked before its owner
// hears of it (namespace policy parked_limit).
const DefaultParkedLimit = 72 * time.Hour

// woken reports whether a guard has claimed (and so may have sent) the
// resume call of a parked key: its next reserve is the resumed execution.
func woken(r *Record) bool { return r.ResumeClaimUntil != nil || r.ResumeSentAt != nil }

// reserveParked decides a reserve of a parked key: one case per phase
// (phase.go).
func reserveParked(cur *Record, br *Breaker, req ReserveRequest, fp Fingerprint, np NamespacePolicy, now time.Time) (Step, error) {
	switch PhaseOf(cur) {
	case PhaseRejected: // a person said no: nothing is written
		return Step{Result: Result{Outcome: OutcomeRejected, Record: cur}}, nil
	case PhaseAwaitingApproval: // a copy waits with it
		return Step{Result: Result{Outcome: OutcomeParked, Record: cur}}, nil
	case PhaseApproved:
		if woken(cur) { // the execution the approval woke
			return startAttempt(cur, br, req, fp, np, now, cur.Attempt+1)
		}
		return Step{Result: Result{Outcome: OutcomeParked, Record: cur}}, nil
	case PhaseWaiting: // in the queue: it goes ahead when the destination takes writes
		if br != nil && br.StateFor(cur.Namespace, now) != BreakerClosed {
			return Step{Result: parkedResult(cur, br, now)}, nil
		}
	}
	// Claimed or resumed: the woken execution goes through to the
	// breaker. Lost: a copy its source sends again is like a new event
	// (and parks again, queued, when it brings a resume_url).
	return startAttempt(cur, br, req, fp, np, now, cur.Attempt+1)
}

// parkedResult answers about a parked key: when it is expected to go ahead.
func parkedResult(cur *Record, br *Breaker, now time.Time) Result {
	return Result{Outcome: OutcomeParked, RetryAfter: catchUpWait(br, cur.Namespace, now), Record: cur}
}

// catchUpWait is when the destination is expected back for namespace ns:
// the end of its cooldown (or of ns's view's), or a second when that has
// passed (a probe is on its way).
func catchUpWait(br *Breaker, ns string, now time.Time) time.Duration {
	if br == nil {
		return time.Second
	}
	if at := br.reopensAtFor(ns); at != nil && now.Before(*at) {
		return at.Sub(now)
	}
	return time.Second
}

// park records cur (nil: a new key) as parked for the reserve or failure
// req describes; attempt is the attempt the key last had (0: none).
func park(cur *Record, br *Breaker, ns, key, owner, dest, resumeURL string, attempt int, fp Fingerprint, detail string, now time.Time) *Record {
	next := cur.Clone()
	if next == nil {
		next = &Record{Namespace: ns, Key: key, CreatedAt: now}
	}
	if !uncalled(cur) {
		// A new parking: also a woken (or claimed) key whose execution
		// reserved while the destination was paused again, and a lost key
		// its source sent again. A late answer about the earlier parking
		// then names another parked_at and changes nothing (it would mark
		// the execution waiting on the new resume URL lost). The event's wait
		// goes on when its woken (or claimed) execution parks again: the
		// destination is still down, and parked_limit counts from the
		// first parking (ParkedSince), so a rolling outage that re-parks
		// every event is still reported overdue. A lost key its source
		// sent again waits anew.
		next.ParkedSince = waitGoesOn(cur)
		next.ParkedAt = timePtr(now)
	}
	next.State = StateParked
	next.Attempt = attempt
	next.Owner = owner
	next.Destination = dest
	next.ResumeURL = resumeURL
	next.ResumeClaimUntil, next.ResumeSentAt = nil, nil
	next.LeaseExpiresAt, next.ExpiresAt, next.Check = nil, nil, nil
	next.Result, next.ResultRef, next.Via = nil, "", ""
	next.Retryable = true
	next.Reason, next.Message = "", "" // a failure that parks sets its own
	next.UpdatedAt = now
	if len(next.Fingerprint) == 0 {
		next.Fingerprint = fp
	}
	next.addHistory(Transition{At: now, Event: HistoryParked, Attempt: attempt, By: owner, Detail: detail})
	return next
}

// uncalled reports whether cur is a parking no guard has called the
// resume URL of yet (not claimed, not woken, not lost): parking it again
// continues the same parking.
func uncalled(cur *Record) bool {
	return cur != nil && cur.State == StateParked && cur.ParkedAt != nil &&
		cur.ResumeClaimUntil == nil && cur.ResumeSentAt == nil && cur.Reason != ReasonResumeLost
}

// DecideClaimResume decides whether a guard may call the resume URL of
// the parked key cur now, holding the call for claim. The first key
// claimed after a destination's cooldown becomes the breaker's probe; while
// the cooldown runs, a probe is out, or a key was lost or already resumed,
// the claim is refused (ok false, nothing written). A key whose
// destination no longer admits its namespace (destinations.<name>.
// namespaces changed after it parked) is not resumed either: its woken
// execution's reserve would be refused and the key would stay parked,
// resumed, for ever. It is recorded resume_lost instead (ok false, the
// step written), so its owner is told and a person decides.
func DecideClaimResume(cur *Record, br *Breaker, claim time.Duration, np NamespacePolicy, now time.Time) (s Step, ok bool) {
	if cur == nil || cur.State != StateParked || cur.Reason == ReasonResumeLost || cur.ResumeSentAt != nil {
		return Step{}, false
	}
	if s, ok, done := claimApprovalResume(cur, claim, now); done {
		return s, ok // approval.go
	}
	if cur.ResumeClaimUntil != nil && now.Before(*cur.ResumeClaimUntil) {
		return Step{}, false
	}
	if cur.Destination != "" && !np.destination(cur.Destination).Admits(cur.Namespace) {
		return loseRefusedNamespace(cur, br, now), false
	}
	if br != nil {
		b := br.Clone()
		switch br.StateFor(cur.Namespace, now) {
		case BreakerOpen:
			return Step{}, false
		case BreakerHalfOpen:
			if b.State == BreakerClosed {
				// Paused for this namespace alone: its view's probe.
				v := b.view(cur.Namespace)
				if v.ProbeUntil != nil && now.Before(*v.ProbeUntil) && !v.isProbe(cur.Key) {
					return Step{}, false
				}
				v.ProbeKey, v.ProbeUntil = cur.Key, timePtr(now.Add(claim+np.Lease))
				s.Breaker = b
				break
			}
			if b.ProbeUntil != nil && now.Before(*b.ProbeUntil) && !b.isProbe(cur.Namespace, cur.Key) {
				return Step{}, false
			}
			// The probe: its resumed execution's reserve is let through
			// (admit), its complete closes the breaker.
			b.State = BreakerHalfOpen
			b.startProbe(cur.Namespace, cur.Key, claim+np.Lease, now)
			s.Breaker = b
		}
	}
	next := cur.Clone()
	next.ResumeClaimUntil = timePtr(now.Add(claim))
	next.UpdatedAt = now
	s.Record = next
	s.Result = Result{Outcome: OutcomeParked, Record: next}
	return s, true
}

// loseRefusedNamespace records a parked key whose destination no longer
// admits its namespace as resume_lost, giving up the breaker's probe if
// it was one.
func loseRefusedNamespace(cur *Record, br *Breaker, now time.Time) Step {
	detail := fmt.Sprintf("not resumed: destination %s no longer accepts namespace %s (destinations.%s.namespaces); a person must decide",
		cur.Destination, cur.Namespace, cur.Destination)
	next := cur.Clone()
	next.UpdatedAt = now
	next.ResumeClaimUntil = nil
	next.Reason, next.Message = ReasonResumeLost, truncate(detail, MaxMessageLength)
	next.addHistory(Transition{At: now, Event: HistoryResumeLost, Attempt: cur.Attempt, Detail: truncate(detail, 200)})
	s := Step{Record: next, Result: Result{Outcome: OutcomeParked, Record: next},
		Events: []Event{{At: now, Kind: EventParkedLost, Namespace: cur.Namespace, Key: cur.Key,
			Attempt: cur.Attempt, Owner: cur.Owner, Destination: cur.Destination, Reason: ReasonResumeLost, Message: next.Message}}}
	if br != nil && br.isProbe(cur.Namespace, cur.Key) {
		b := br.Clone()
		b.releaseProbe(cur.Namespace, cur.Key)
		s.Breaker = b
	}
	return s
}

// ResumeAnswer is what n8n said to a resume call.
type ResumeAnswer int

const (
	// ResumeAccepted: n8n resumed the execution; it will reserve again.
	ResumeAccepted ResumeAnswer = iota + 1
	// ResumeLost: n8n no longer holds it (404; 409 "finished"): deleted,
	// pruned, cancelled. A person must decide about the event.
	ResumeLost
	// ResumeRetry: n8n is down or the execution has not reached its Wait
	// node yet; the claim is dropped so the call is tried again.
	ResumeRetry
	// ResumeSilent: not n8n's answer but the runner's finding about a key
	// n8n already woke: its execution never reserved again (WokenSilent).
	// Recorded like ResumeLost; the one answer that applies to a woken key.
	ResumeSilent
)

// DecideResumeAnswered records n8n's answer to the resume call of the key
// parked at parkedAt, br being its destination's breaker (nil: none). A
// key that moved on meanwhile (its resumed execution already reserved it,
// or it parked again) is left alone. A lost key that was the breaker's
// probe gives the probe up in the same step: its execution will never
// reserve, so the next parked key probes at once instead of after claim +
// lease.
func DecideResumeAnswered(cur *Record, br *Breaker, parkedAt time.Time, answer ResumeAnswer, detail string, now time.Time) (Step, bool) {
	if cur == nil || cur.State != StateParked || cur.ParkedAt == nil || !cur.ParkedAt.Equal(parkedAt) {
		return Step{}, false
	}
	if cur.Reason == ReasonApprovalRejected {
		return rejectedResumeAnswered(cur, answer, detail, now) // approval.go
	}
	next := cur.Clone()
	next.UpdatedAt = now
	var events []Event
	switch answer {
	case ResumeAccepted:
		if cur.ResumeSentAt != nil || cur.ResumeClaimUntil == nil {
			// Without a claim the answer is stale: the woken execution
			// already parked the key again (park clears the claim) and the
			// new resume URL has not been called yet.
			return Step{}, false
		}
		next.ResumeSentAt = timePtr(now)
		next.addHistory(Transition{At: now, Event: HistoryResumed, Attempt: cur.Attempt})
	case ResumeLost, ResumeSilent:
		if cur.Reason == ReasonResumeLost {
			return Step{}, false // told once: the owner's event is not sent again
		}
		if (answer == ResumeSilent) != (cur.ResumeSentAt != nil) {
			// A lost answer about a woken key is a stale claimant's (its
			// claim lapsed, another guard's call woke the execution, the
			// late call got 404/409): the execution lives. And a key not
			// woken is not silent.
			return Step{}, false
		}
		if cur.Reason == ReasonAwaitingApproval {
			// Never called before a person decides: a stray answer must not
			// end the wait (a copy would then be written unapproved).
			return Step{}, false
		}
		next.ResumeClaimUntil = nil
		next.Reason, next.Message = ReasonResumeLost, truncate(detail, MaxMessageLength)
		next.addHistory(Transition{At: now, Event: HistoryResumeLost, Attempt: cur.Attempt, Detail: truncate(detail, 200)})
		events = append(events, Event{At: now, Kind: EventParkedLost, Namespace: cur.Namespace, Key: cur.Key,
			Attempt: cur.Attempt, Owner: cur.Owner, Destination: cur.Destination, Reason: ReasonResumeLost, Message: next.Message})
		if br != nil && br.isProbe(cur.Namespace, cur.Key) {
			b := br.Clone()
			b.releaseProbe(cur.Namespace, cur.Key)
			return Step{Record: next, Breaker: b, Events: events, Result: Result{Outcome: OutcomeParked, Record: next}}, true
		}
	case ResumeRetry:
		if cur.ResumeClaimUntil == nil || cur.ResumeSentAt != nil {
			return Step{}, false
		}
		next.ResumeClaimUntil = nil
	default:
		return Step{}, false
	}
	return Step{Record: next, Events: events, Result: Result{Outcome: OutcomeParked, Record: next}}, true
}

// WokenSilent reports whether rec is a parked key whose resume call n8n
// accepted at least bound ago while its woken execution has not reserved
// the key again (that reserve moves the key out of parked): the execution
// died after waking (n8n restarted, a worker was killed). An approved key
// whose execution the approval resumer woke is watched the same way (a
// person approved it; its write must not wait unseen for ever); keys
// awaiting approval or rejected are left to the approval flow (a
// rejected execution writes nothing). The runner records such a key lost
// (ResumeAnswered with ResumeSilent): parked, resume_lost, its owner told,
// never resumed again by the guard. Not unknown: the woken execution's
// first step is the reserve, so one that never reserved never passed the
// guard to the write; a copy its source sends again may go ahead.
func WokenSilent(rec *Record, bound time.Duration, now time.Time) bool {
	approvedWoken := PhaseOf(rec) == PhaseApproved && rec.ParkedAt != nil && rec.ResumeSentAt != nil
	return (Woken(rec) || approvedWoken) && !now.Before(rec.ResumeSentAt.Add(bound))
}

// Woken reports whether rec is a parked key whose resume call n8n
// accepted and whose woken execution has not reserved it again yet (that
// reserve moves the key out of parked): "resumed, waiting for the
// execution". It counts in WokenCounts until the execution reserves or
// the key is recorded lost (WokenSilent). Keys of the approval flow are
// the approval resumer's and never count.
func Woken(rec *Record) bool {
	return PhaseOf(rec) == PhaseResumed && rec.ParkedAt != nil
}

// WokenSilentDetail is the message a silent woken execution's key keeps
// (and its parked_lost event carries); IsWokenSilent tells it from n8n's
// own 404/409 answers.
func WokenSilentDetail(rec *Record, bound time.Duration) string {
	return fmt.Sprintf(wokenSilentPrefix+"%s, the execution did not reserve the key again within %s (it died: n8n restarted?); nothing was written through the guard: look at the execution in n8n, then resolve or let the source send it again",
		rec.ResumeSentAt.UTC().Format(time.RFC3339), bound)
}

const wokenSilentPrefix = "woken at "

// IsWokenSilent reports whether a lost key's message (or its parked_lost
// event's) is WokenSilentDetail's: n8n took the resume call and the
// execution died after waking, rather than n8n no longer holding it.
func IsWokenSilent(message string) bool { return strings.HasPrefix(message, wokenSilentPrefix) }

// EventParkedLost: n8n no longer holds a parked execution; its owner must
// decide about the event.
const EventParkedLost EventKind = "parked_lost"

// ParkStore is the part of Store that parking, the catch-up runner and
// maintenance windows use; storetest checks it on every store.
type ParkStore interface {
	CatchUpRecorder // the end of a catch-up, in the event log (caughtup.go)
	// WaitReader lists parked keys by the start of their wait: the
	// catch-up's queue (QueuedStages), the overdue ones of parked_limit,
	// a destination's (wait.go).
	WaitReader
	// ParkedCounts returns the number of parked keys per destination
	// that wait to be resumed (not yet woken, not lost, not in the
	// approval flow).
	ParkedCounts(ctx context.Context) (map[string]int, error)
	// WokenCounts returns the number of parked keys per destination whose
	// execution n8n woke and that have not been reserved again (Woken).
	WokenCounts(ctx context.Context) (map[string]int, error)
	// ClaimResume applies DecideClaimResume to a key and its destination's
	// breaker atomically; ok is false when the claim was refused. Of any
	// number of guards claiming one key at once, exactly one gets it.
	ClaimResume(ctx context.Context, ns, key string, claim time.Duration) (r *Record, ok bool, err error)
	// ClaimResumeBehind applies DecideClaimBehind (claim.go): a claim
	// that is never the breaker's probe, for keys claimed behind an
	// older one.
	ClaimResumeBehind(ctx context.Context, ns, key string, claim time.Duration) (r *Record, ok bool, err error)
	// ExtendResumeClaim applies DecideExtendResumeClaim (claim.go): the
	// holder of the claim held keeps it while its call is in flight.
	// until is the claim's new end; ok is false when the claim is no
	// longer the holder's (answered, lost, taken after a lapse).
	ExtendResumeClaim(ctx context.Context, ns, key string, held time.Time, claim time.Duration) (until time.Time, ok bool, err error)
	// ReleaseResumeClaim applies DecideReleaseResumeClaim: a claim whose
	// call was not made is handed back (the key waits again at once).
	ReleaseResumeClaim(ctx context.Context, ns, key string, held time.Time) (ok bool, err error)
	// ResumeAnswered applies DecideResumeAnswered.
	ResumeAnswered(ctx context.Context, ns, key string, parkedAt time.Time, answer ResumeAnswer, detail string) (*Record, error)
	// ParkedOverdue applies DecideParkedOverdue (overdue.go): reported is
	// true for the one call that recorded the report and its event.
	ParkedOverdue(ctx context.Context, ns, key string, parkedAt time.Time, limit time.Duration) (reported bool, err error)
	// TakeResumeTurn applies DecideResumeTurn to req's destination's
	// pace atomically, each slot's key read in the same transaction
	// (ResumeInFlight): of the guards sharing the store, the resume calls
	// of one destination keep its catch_up_rate and catch_up_concurrency
	// together, across restarts.
	TakeResumeTurn(ctx context.Context, req TurnRequest) (t Turn, ok bool, wait time.Duration, err error)
	// EndResumeCall records that the call of t returned (EndCall).
	EndResumeCall(ctx context.Context, t Turn) error
	// ReleaseResumeTurn frees a turn's slot (ReleaseTurn) once its
	// resumed execution finished or was given up.
	ReleaseResumeTurn(ctx context.Context, t Turn) error
	// PaceAhead is how far ahead of now a turn may be asked for
	// (TurnRequest.Ahead): more than 0 only when the store's clock is the
	// caller's.
	PaceAhead() time.Duration
	// PaceFreed is closed when this process next frees a slot or ends a
	// call of any destination (ask again after each wake): a waiting call
	// looks again at once. Another guard's are not seen: look again after
	// a while too.
	PaceFreed() <-chan struct{}
	// HoldDestination applies DecideHoldDestination (maintenance.go).
	HoldDestination(ctx context.Context, destination, by, reason string, until time.Time) (Breaker, error)
	// EndHold applies DecideEndHold: a destination without a breaker is
	// not found.
	EndHold(ctx context.Context, destination, by, reason string) (Breaker, error)
}

// waitGoesOn is when the event of cur began to wait, when a write of cur
// continues that wait (nil: it does not): a woken or claimed parked key
// whose execution reserves, and that execution's attempt (reserved) when
// its write meets the destination down and parks again. A lost key that
// its source sends again is a new wait.
func waitGoesOn(cur *Record) *time.Time {
	switch {
	case cur == nil:
		return nil
	case cur.State == StateParked && cur.Reason != ReasonResumeLost:
		return copyTime(cur.WaitingSince())
	case cur.State == StateReserved:
		return copyTime(cur.ParkedSince)
	}
	return nil
}
