package keystore

import (
	"context"
	"time"
)

// A resume claim (DecideClaimResume) is held by one guard's call. It is
// written with a fixed length, but a call may take longer (a turn waited
// for, n8n slow to answer, backoff): the holder extends it while its call
// is in flight, so it never lapses under a live call and a second guard
// never calls the same resume URL meanwhile. A holder that stops before
// calling (SIGTERM, no turn came free) hands the claim back at once, so
// the key waits for no lapse. The holder names its claim by the
// ResumeClaimUntil it last got: a claim that lapsed and was taken by
// another guard is not its own any more.
//
//	extend, own claim, not answered -> claim until now+claim; the probe's hold too
//	extend, answered, lost, another's claim -> refused, nothing written
//	release, own claim, not answered -> no claim (waiting); the probe is given up
//	release, otherwise               -> refused, nothing written

// ownClaim reports whether cur's resume claim is the one its holder last
// got (held): parked, not lost, not answered yet. Stores keep times in
// milliseconds (bbolt) or microseconds (PostgreSQL), so the instants are
// compared to the millisecond.
func ownClaim(cur *Record, held time.Time) bool {
	return cur != nil && cur.State == StateParked && cur.Reason != ReasonResumeLost &&
		cur.ResumeSentAt == nil && cur.ResumeClaimUntil != nil &&
		cur.ResumeClaimUntil.Truncate(time.Millisecond).Equal(held.Truncate(time.Millisecond))
}

// DecideExtendResumeClaim extends the resume claim held (the claim's
// until as its holder got it) to now+claim while its call is in flight.
// When the key is its destination's probe the probe's hold is extended
// the same way (claim and the namespace's lease after now, as the claim
// set it), so no other key becomes the probe under a live call.
func DecideExtendResumeClaim(cur *Record, br *Breaker, held time.Time, claim time.Duration, np NamespacePolicy, now time.Time) (Step, bool) {
	if !ownClaim(cur, held) {
		return Step{}, false
	}
	next := cur.Clone()
	until := now.Add(claim)
	if until.Before(*cur.ResumeClaimUntil) {
		until = *cur.ResumeClaimUntil // never shortened
	}
	next.ResumeClaimUntil = timePtr(until)
	next.UpdatedAt = now
	s := Step{Record: next, Result: Result{Outcome: OutcomeParked, Record: next}}
	if br != nil && br.isProbe(cur.Namespace, cur.Key) {
		b := br.Clone()
		b.holdProbe(cur.Namespace, cur.Key, now.Add(claim+np.Lease))
		s.Breaker = b
	}
	return s, true
}

// DecideReleaseResumeClaim hands a resume claim back before its call
// was made: the key is waiting again, the next claim (this guard's after
// a restart, or another guard's) may take it at once. A probe it was is
// given up, as a lost probe's is: the next claim becomes the probe.
func DecideReleaseResumeClaim(cur *Record, br *Breaker, held time.Time, now time.Time) (Step, bool) {
	if !ownClaim(cur, held) {
		return Step{}, false
	}
	next := cur.Clone()
	next.ResumeClaimUntil = nil
	next.UpdatedAt = now
	s := Step{Record: next, Result: Result{Outcome: OutcomeParked, Record: next}}
	if br != nil && br.isProbe(cur.Namespace, cur.Key) {
		b := br.Clone()
		b.releaseProbe(cur.Namespace, cur.Key)
		s.Breaker = b
	}
	return s, true
}

// holdProbe moves the hold of the probe ns/key (the breaker's, or ns's
// view's) to until when that is later.
func (b *Breaker) holdProbe(ns, key string, until time.Time) {
	if b.globalProbe(ns, key) && (b.ProbeUntil == nil || b.ProbeUntil.Before(until)) {
		b.ProbeUntil = timePtr(until)
	}
	if v := b.view(ns); v != nil && v.isProbe(key) && (v.ProbeUntil == nil || v.ProbeUntil.Before(until)) {
		v.ProbeUntil = timePtr(until)
	}
}

// ExtendResumeClaim implements ParkStore.
func (o *Operations) ExtendResumeClaim(ctx context.Context, ns, key string, held time.Time, claim time.Duration) (time.Time, bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return time.Time{}, false, err
	}
	np := o.Policies.Namespace(ns)
	extended := false
	res, err := o.Driver.DecideKey(ctx, Op{Name: "extend resume claim", Namespace: ns, Key: key, Breaker: RecordBreaker,
		Decide: func(cur *Record, br *Breaker, now time.Time) (Step, error) {
			st, ok := DecideExtendResumeClaim(cur, br, held, claim, np, now)
			extended = ok
			return st, nil
		}})
	if err != nil || !extended || res.Record == nil || res.Record.ResumeClaimUntil == nil {
		return time.Time{}, false, err
	}
	return *res.Record.ResumeClaimUntil, true, nil
}

// ReleaseResumeClaim implements ParkStore.
func (o *Operations) ReleaseResumeClaim(ctx context.Context, ns, key string, held time.Time) (bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return false, err
	}
	released := false
	_, err = o.Driver.DecideKey(ctx, Op{Name: "release resume claim", Namespace: ns, Key: key, Breaker: RecordBreaker,
		Decide: func(cur *Record, br *Breaker, now time.Time) (Step, error) {
			st, ok := DecideReleaseResumeClaim(cur, br, held, now)
			released = ok
			return st, nil
		}})
	return released && err == nil, err
}

// WokenProbeHold is st (DecideResumeAnswered's step) with the hold of a
// probe n8n just woke set to lease from now: the woken execution has a
// lease to reserve its key (its reserve then holds the probe for its own
// lease, admit). Held for the claim and a lease from its claim instead, a
// probe whose execution died held its whole destination for a claim
// longer than that execution could still write.
func WokenProbeHold(st Step, cur *Record, br *Breaker, lease time.Duration, now time.Time) Step {
	if st.Record == nil || st.Record.ResumeSentAt == nil || cur.ResumeSentAt != nil || br == nil || !br.isProbe(cur.Namespace, cur.Key) {
		return st
	}
	b := st.Breaker
	if b == nil {
		b = br.Clone()
	}
	until := timePtr(now.Add(lease))
	if b.globalProbe(cur.Namespace, cur.Key) {
		b.ProbeUntil = until
	}
	if v := b.view(cur.Namespace); v != nil && v.isProbe(cur.Key) {
		v.ProbeUntil = copyTime(until)
	}
	st.Breaker = b
	return st
}

// DecideClaimBehind is DecideClaimResume for a key claimed behind an
// older one, several at once (the catch-up's claims after the first of a
// pass): it never becomes the probe. While its destination's breaker is
// not closed for its namespace it is refused, nothing written, so the
// probe is always the oldest waiting key, which the catch-up claims
// alone (DecideClaimResume). Otherwise, after a lost probe, whichever of
// the claims in flight came first became the probe, not the oldest.
func DecideClaimBehind(cur *Record, br *Breaker, claim time.Duration, np NamespacePolicy, now time.Time) (Step, bool) {
	if cur != nil && br != nil && br.StateFor(cur.Namespace, now) != BreakerClosed {
		return Step{}, false
	}
	return DecideClaimResume(cur, br, claim, np, now)
}

// ClaimResumeBehind implements ParkStore.
func (o *Operations) ClaimResumeBehind(ctx context.Context, ns, key string, claim time.Duration) (*Record, bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return nil, false, err
	}
	np := o.Policies.Namespace(ns)
	claimed := false
	res, err := o.Driver.DecideKey(ctx, Op{Name: "claim resume", Namespace: ns, Key: key, Breaker: RecordBreaker,
		Decide: func(cur *Record, br *Breaker, now time.Time) (Step, error) {
			st, ok := DecideClaimBehind(cur, br, claim, np, now)
			claimed = ok
			return st, nil
		}})
	if err != nil || !claimed || res.Record == nil {
		return nil, false, err
	}
	return res.Record, true, nil
}

// ProbeInFlight reports whether a probe of b is out at now: a key (the
// breaker's, or a namespace view's) let through half open, within its
// hold. A half-open breaker without one waits for its next write or
// parked event to probe: nothing tests the destination yet, and no view
// may say "probing" of it (a lost probe gives it up; one that lapsed is
// replaced).
func (b *Breaker) ProbeInFlight(now time.Time) bool {
	if b.ProbeKey != "" && b.ProbeUntil != nil && now.Before(*b.ProbeUntil) {
		return true
	}
	for _, v := range b.Views {
		if v.ProbeKey != "" && v.ProbeUntil != nil && now.Before(*v.ProbeUntil) {
			return true
		}
	}
	return false
}
