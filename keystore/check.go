package keystore

import (
	"context"
	"strconv"
	"time"
)

// Checks: reconcile before paging. A namespace (or a destination) may name
// a check, an n8n workflow that looks in the target for the record an
// attempt may have written ("is there a contact with this event id?").
// When a key there becomes unknown, the page about it is held back and
// the key waits for its check; a guard claims the call (so of several
// guards on one PostgreSQL exactly one calls it), calls, and records the
// answer:
//
//	unknown, namespace with a check -> unknown + check hold (no key_unknown event yet: the page waits)
//	claim the check (a guard)       -> unknown + claim, one more claim counted
//	claim, claims used up           -> unknown, hold dropped, key_unknown (the person is paged as before)
//	found <reference>               -> completed with that reference (key_resolved by the check)
//	absent                          -> failed, retryable (key_resolved); with a resume URL: parked, the catch-up resumes it
//	no usable answer                -> unknown, hold dropped, key_unknown (the person is paged as before)
//	complete, fail, resolve meanwhile -> as without a check; the hold goes, and the check's answer is then ignored
//
// An answer counts only for the attempt it was asked about, while that
// attempt is still unknown and held: a person's decision made meanwhile
// always stands.

// DefaultCheckClaims is how many times the guards claim a key's check
// (each claim tries the call a few times with backoff) before the person
// is paged after all: a claim left by a crash lapses and counts.
const DefaultCheckClaims = 3

// CheckHold is kept on an unknown key whose page waits for its check.
type CheckHold struct {
	Check string    `json:"check"` // the check's name (Policies.CheckFor)
	Since time.Time `json:"since"`
	// ClaimUntil: one guard is calling the check until then.
	ClaimUntil *time.Time `json:"claim_until,omitempty"`
	Claims     int        `json:"claims"`
	// ResumeURL: the failing execution waits in n8n (a Wait node); an
	// absent answer parks the key with it, so the catch-up resumes it.
	ResumeURL string `json:"resume_url,omitempty"`
}

// Clone returns a deep copy.
func (h *CheckHold) Clone() *CheckHold {
	if h == nil {
		return nil
	}
	c := *h
	c.ClaimUntil = copyTime(h.ClaimUntil)
	return &c
}

// CheckFor names the check of a key of namespace ns writing to dest: the
// namespace's, else the destination's; "" when there is none.
func (p Policies) CheckFor(ns, dest string) string {
	if c := p.Namespaces[ns].Check; c != "" {
		return c
	}
	if dest == "" {
		return ""
	}
	return p.Destinations[dest].Check
}

// holdForCheck puts the unknown record next on hold for its check, when
// its namespace or destination has one: the page waits (no key_unknown
// event). resumeURL is where the failing execution waits, if it does.
func holdForCheck(next *Record, np NamespacePolicy, resumeURL string, now time.Time) bool {
	name := np.Check
	if name == "" && next.Destination != "" && np.destinations != nil {
		name = (*np.destinations)[next.Destination].Check
	}
	if name == "" {
		return false
	}
	next.Check = &CheckHold{Check: name, Since: now, ResumeURL: resumeURL}
	return true
}

// CheckClaim is what a claim of a key's check came to.
type CheckClaim int

const (
	// CheckRefused: nothing to check (the key moved on), or another guard
	// holds the call.
	CheckRefused CheckClaim = iota
	// CheckClaimed: this guard may call the check now.
	CheckClaimed
	// CheckGaveUp: the claims are used up; the person is paged.
	CheckGaveUp
)

// held reports whether cur is an unknown key of attempt waiting for its check.
func held(cur *Record, attempt int) bool {
	return cur != nil && cur.State == StateUnknown && cur.Check != nil && cur.Attempt == attempt
}

// DecideClaimCheck decides whether a guard may call the check of attempt
// of cur now, holding the call for claim; of at most maxClaims claims.
func DecideClaimCheck(cur *Record, attempt int, claim time.Duration, maxClaims int, now time.Time) (Step, CheckClaim) {
	if !held(cur, attempt) {
		return Step{}, CheckRefused
	}
	if h := cur.Check; h.ClaimUntil != nil && now.Before(*h.ClaimUntil) {
		return Step{}, CheckRefused
	}
	if cur.Check.Claims >= maxClaims {
		return releasePage(cur, "no answer from the check after "+strconv.Itoa(cur.Check.Claims)+" claims", now), CheckGaveUp
	}
	next := cur.Clone()
	next.Check.ClaimUntil = timePtr(now.Add(claim))
	next.Check.Claims++
	next.UpdatedAt = now
	return Step{Record: next, Result: Result{Outcome: OutcomeStateUnknown, Record: next}}, CheckClaimed
}

// A check's claim is held while its call is in flight, as a resume claim
// is (claim.go): its holder extends it, so it never lapses under a live
// call and no second guard calls meanwhile; a guard that stops hands it
// back with no answer recorded, and the key's next claim may come at once.
// A handed-back claim is not counted: it was cut short by the guard, not
// by the check. The holder names its claim by the ClaimUntil it last got.
//
//	extend, own claim, still held   -> claim until now+claim (never shortened)
//	release, own claim, still held  -> no claim, one claim fewer counted
//	either, otherwise               -> refused, nothing written

// ownCheckClaim reports whether cur, held for the check of attempt, is
// claimed until until (to the millisecond, as ownClaim compares).
func ownCheckClaim(cur *Record, attempt int, until time.Time) bool {
	return held(cur, attempt) && cur.Check.ClaimUntil != nil &&
		cur.Check.ClaimUntil.Truncate(time.Millisecond).Equal(until.Truncate(time.Millisecond))
}

// DecideExtendCheckClaim extends the check claim its holder got until
// until to now+claim.
func DecideExtendCheckClaim(cur *Record, attempt int, until time.Time, claim time.Duration, now time.Time) (Step, bool) {
	if !ownCheckClaim(cur, attempt, until) {
		return Step{}, false
	}
	next := cur.Clone()
	next.Check.ClaimUntil = timePtr(now.Add(claim))
	if next.Check.ClaimUntil.Before(until) {
		next.Check.ClaimUntil = timePtr(until) // never shortened
	}
	next.UpdatedAt = now
	return Step{Record: next, Result: Result{Outcome: OutcomeStateUnknown, Record: next}}, true
}

// DecideReleaseCheckClaim hands back the check claim its holder got until
// until.
func DecideReleaseCheckClaim(cur *Record, attempt int, until time.Time, now time.Time) (Step, bool) {
	if !ownCheckClaim(cur, attempt, until) {
		return Step{}, false
	}
	next := cur.Clone()
	next.Check.ClaimUntil = nil
	next.Check.Claims = max(next.Check.Claims-1, 0)
	next.UpdatedAt = now
	return Step{Record: next, Result: Result{Outcome: OutcomeStateUnknown, Record: next}}, true
}

// CheckResult is what a check said.
type CheckResult string

const (
	CheckFound  CheckResult = "found"  // the target has the record: the attempt took effect
	CheckAbsent CheckResult = "absent" // it has not: the attempt did not take effect
	CheckFailed CheckResult = "failed" // no usable answer (error, garbage, no answer in time)
)

// CheckAnswer is a check's answer about one attempt.
type CheckAnswer struct {
	Result    CheckResult
	Reference string // the target's record (found)
	// Workflow and Execution name the n8n workflow and execution that
	// answered, when it said so.
	Workflow  string
	Execution string
	Detail    string // why a check failed
}

// By is who the key's history says decided: the check, by name.
func checkBy(h *CheckHold) string { return "check:" + h.Check }

func (a CheckAnswer) source() string {
	s := ""
	if a.Workflow != "" {
		s += " (workflow " + truncate(a.Workflow, 80)
		if a.Execution != "" {
			s += ", execution " + truncate(a.Execution, 40)
		}
		s += ")"
	} else if a.Execution != "" {
		s += " (execution " + truncate(a.Execution, 40) + ")"
	}
	return s
}

// DecideCheckAnswered records a check's answer about attempt of cur. An
// answer about a key that moved on (a person decided, the holder reported
// late, a newer attempt) is ignored: ok false, nothing written.
func DecideCheckAnswered(cur *Record, attempt int, a CheckAnswer, np NamespacePolicy, now time.Time) (Step, bool) {
	if !held(cur, attempt) {
		return Step{}, false
	}
	h := cur.Check
	if a.Result == CheckFound && a.Reference == "" {
		a = CheckAnswer{Result: CheckFailed, Workflow: a.Workflow, Execution: a.Execution, Detail: "the check answered found without a reference"}
	}
	switch a.Result {
	case CheckFound, CheckAbsent:
	default:
		detail := a.Detail
		if detail == "" {
			detail = "the check gave no usable answer"
		}
		return releasePage(cur, detail+a.source(), now), true
	}
	by := checkBy(h)
	next := cur.Clone()
	next.Check = nil
	next.LeaseExpiresAt = nil
	next.ResolvedBy, next.ResolvedAt = by, timePtr(now)
	next.ExpiresAt = timePtr(now.Add(np.Retention))
	next.UpdatedAt = now
	s := Step{Record: next}
	if a.Result == CheckFound {
		next.State = StateCompleted
		next.ResultRef = truncate(a.Reference, 512) // the limit of result_ref
		next.Reason, next.Message, next.Retryable = "", "", false
		next.Note = "found by the check" + a.source()
		next.addHistory(Transition{At: now, Event: HistoryChecked, Attempt: cur.Attempt, By: by, Detail: "found " + truncate(next.ResultRef, 120) + a.source()})
		s.Result = Result{Outcome: OutcomeCompleted, Record: next}
	} else {
		next.State, next.Retryable = StateFailed, true
		next.Note = "the check found nothing" + a.source()
		next.addHistory(Transition{At: now, Event: HistoryChecked, Attempt: cur.Attempt, By: by, Detail: "absent" + a.source()})
		s.Result = Result{Outcome: OutcomeFailed, Record: next}
		if h.ResumeURL != "" {
			// The execution waits in n8n: the catch-up resumes it, and its
			// reserve starts the next attempt.
			p := park(next, nil, cur.Namespace, cur.Key, cur.Owner, cur.Destination, h.ResumeURL, cur.Attempt, nil, "the check found nothing", now)
			p.ResolvedBy, p.ResolvedAt, p.Note = by, timePtr(now), next.Note
			s.Record, s.Result = p, Result{Outcome: OutcomeParked, Record: p}
		}
	}
	// The same event as a person's resolution: notify updates a message
	// already sent about the attempt, and stops its escalation.
	s.Events = []Event{{At: now, Kind: EventKeyResolved, Namespace: cur.Namespace, Key: cur.Key, Attempt: cur.Attempt,
		Owner: by, Message: string(map[CheckResult]State{CheckFound: StateCompleted, CheckAbsent: StateFailed}[a.Result])}}
	return s, true
}

// releasePage drops cur's hold and pages the person, as a key going
// unknown without a check does.
func releasePage(cur *Record, detail string, now time.Time) Step {
	next := cur.Clone()
	by := checkBy(cur.Check)
	next.Check = nil
	next.UpdatedAt = now
	next.addHistory(Transition{At: now, Event: HistoryCheckFailed, Attempt: cur.Attempt, By: by, Detail: truncate(detail, 200)})
	ev := Event{At: now, Kind: EventKeyUnknown, Namespace: cur.Namespace, Key: cur.Key, Attempt: cur.Attempt,
		Owner: cur.Owner, Destination: cur.Destination, Reason: cur.Reason, Message: cur.Message}
	return Step{Record: next, Events: []Event{ev}, Result: Result{Outcome: OutcomeStateUnknown, Record: next}}
}

// CheckStore is the part of Store that the check runner uses;
// storetest checks it on every store.
type CheckStore interface {
	// HeldForCheck lists unknown keys whose page waits for their check,
	// the longest waiting first.
	HeldForCheck(ctx context.Context, limit int) ([]*Record, error)
	// ClaimCheck applies DecideClaimCheck atomically: of any number of
	// guards claiming one key's check at once, at most one gets it.
	ClaimCheck(ctx context.Context, ns, key string, attempt int, claim time.Duration, maxClaims int) (*Record, CheckClaim, error)
	// ExtendCheckClaim applies DecideExtendCheckClaim: the claim's new
	// until, ok false when it is no longer the holder's.
	ExtendCheckClaim(ctx context.Context, ns, key string, attempt int, until time.Time, claim time.Duration) (time.Time, bool, error)
	// ReleaseCheckClaim applies DecideReleaseCheckClaim.
	ReleaseCheckClaim(ctx context.Context, ns, key string, attempt int, until time.Time) (bool, error)
	// CheckAnswered applies DecideCheckAnswered; ok is false when the
	// answer was ignored (the key moved on).
	CheckAnswered(ctx context.Context, ns, key string, attempt int, a CheckAnswer) (r *Record, ok bool, err error)
}

// ExtendCheckClaim implements CheckStore.
func (o *Operations) ExtendCheckClaim(ctx context.Context, ns, key string, attempt int, until time.Time, claim time.Duration) (time.Time, bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return time.Time{}, false, err
	}
	extended := false
	res, err := o.Driver.DecideKey(ctx, Op{Name: "extend check claim", Namespace: ns, Key: key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			st, ok := DecideExtendCheckClaim(cur, attempt, until, claim, now)
			extended = ok
			return st, nil
		}})
	if err != nil || !extended || res.Record == nil || res.Record.Check == nil || res.Record.Check.ClaimUntil == nil {
		return time.Time{}, false, err
	}
	return *res.Record.Check.ClaimUntil, true, nil
}

// ReleaseCheckClaim implements CheckStore.
func (o *Operations) ReleaseCheckClaim(ctx context.Context, ns, key string, attempt int, until time.Time) (bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return false, err
	}
	released := false
	_, err = o.Driver.DecideKey(ctx, Op{Name: "release check claim", Namespace: ns, Key: key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			st, ok := DecideReleaseCheckClaim(cur, attempt, until, now)
			released = ok
			return st, nil
		}})
	return released && err == nil, err
}
