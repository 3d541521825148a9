package keystore

import (
	"context"
	"slices"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Re-runs: a failed execution of n8n is re-run by the guard, and the
// re-run reserves the key again. n8n's retry continues at the node that
// failed, so a workflow guarded by `n8n guard` ends a retryable failure
// at a gate: a reserve with rerun set, which fails its node until a
// person allows the re-run. The gate's first call records where the
// execution waits; a person's grant (resolve, failed, with rerun) lets
// the next reserve of the key start an attempt; the guard asks n8n to
// retry the execution (package rerun) and notes what n8n said.
//
//	reserve rerun: failed, retryable, a person allowed a retry since it failed
//	               (rerun_granted, rerun_starting, rerun_started, or resolved) -> reserved (accepted, attempt+1), as any reserve
//	               failed, retryable, not allowed -> history rerun_gate, once per execution; rerun_not_granted (409)
//	               any other state                -> as a reserve without rerun
//	reserve:       failed, retryable, at its gate (RerunHolder: the last re-run event is rerun_gate or rerun_refused,
//	               no grant since) -> rerun_not_granted (409), nothing written, whichever execution asks
//
// A key at its gate is written only after a person's grant, whichever
// reserve reaches it: the gated execution run again from its start (n8n
// answers the API's Retry of an execution still running at its gate, the
// gate's Retry On Fail keeping it running, with 200 and runs it from its
// first node, whose reserve has no rerun), a person's Retry in n8n, or a
// copy the source sends. The person at the gate decides whether the event
// is written again; any of them writing first would decide for them. A
// grant or a plain "allow a retry" (resolve, failed) opens the key to the
// next reserve of any of them, as before.
//	resolve rerun: failed, retryable, waiting at its gate (or n8n refused the re-run) -> history rerun_granted
//	               granted, starting or started already -> the same answer (a repeat; no second re-run)
//	               anything else                  -> conflict, nothing written
//	claim re-run:  granted, or starting or started and stale -> rerun_starting (one replica calls n8n)
//	extend claim:  its holder's claim, not answered -> rerun_starting dated now (it never lapses while n8n is asked)
//	release claim: its holder's claim, n8n not asked -> rerun_starting removed (granted, or started and stale, again)
//	note re-run:   starting -> rerun_started (the new execution) | granted, starting or started -> rerun_refused (n8n's words), event rerun_refused

// History events of re-runs.
const (
	// HistoryRerunGate: the execution stopped at its re-run gate; By is
	// the execution as its reserve named it ("n8n <workflow> exec <id>").
	HistoryRerunGate    HistoryEvent = "rerun_gate"
	HistoryRerunGranted HistoryEvent = "rerun_granted" // a person allowed the re-run
	// HistoryRerunStarting: a guard claimed the re-run and asks n8n; a
	// claim left stale (the guard stopped, n8n did not answer) may be taken
	// again (DecideClaimRerun).
	HistoryRerunStarting HistoryEvent = "rerun_starting"
	HistoryRerunStarted  HistoryEvent = "rerun_started" // n8n started the re-run; Detail names it
	HistoryRerunRefused  HistoryEvent = "rerun_refused" // n8n refused the re-run; Detail says why
)

// OutcomeRerunNotGranted answers a gate's reserve of a key that no person
// allowed a re-run of: the API answers 409 rerun_not_granted, so the gate
// node fails and its execution stops there, to be re-run.
const OutcomeRerunNotGranted Outcome = "rerun_not_granted"

// RerunStore is the part of Store that the re-runs' worker uses.
type RerunStore interface {
	// ClaimRerunHeld appends HistoryRerunStarting (By: by) to a granted
	// key, or to one whose claim is older than claim or whose started
	// re-run is older than started without having reserved the key: the
	// one guard that wins asks n8n. It gives the claim's time (its entry's
	// At), by which its holder extends it and hands it back. ok false, and
	// nothing is written, for any other key (another guard claimed it, the
	// grant was taken or withdrawn).
	ClaimRerunHeld(ctx context.Context, ns, key, by string, claim, started time.Duration) (at time.Time, ok bool, err error)
	// ExtendRerunClaim applies DecideExtendRerunClaim: the claim's new
	// time; ok false when it is no longer by's claim of at (n8n's answer
	// was noted, it was taken after a lapse, the grant was withdrawn or
	// taken by the re-run).
	ExtendRerunClaim(ctx context.Context, ns, key, by string, at time.Time) (time.Time, bool, error)
	// ReleaseRerunClaim applies DecideReleaseRerunClaim.
	ReleaseRerunClaim(ctx context.Context, ns, key, by string, at time.Time) (bool, error)
	// NoteRerun appends HistoryRerunStarted (to a claimed key) or
	// HistoryRerunRefused (to a granted, claimed or started one); false
	// when the key is no longer so, and nothing is written.
	NoteRerun(ctx context.Context, ns, key string, event HistoryEvent, detail string) (bool, error)
}

// decideRerunGate decides a reserve of a failed, retryable key that is
// at its gate, or a gate's reserve (req.Rerun) of a failed, retryable key;
// false for every other reserve, which goes on as any reserve does.
func decideRerunGate(cur *Record, req ReserveRequest, now time.Time) (Step, bool) {
	if cur == nil || cur.State != StateFailed || !cur.Retryable {
		return Step{}, false
	}
	if !req.Rerun {
		if RerunHolder(cur) == "" {
			return Step{}, false
		}
		// Not a gate: nothing to record of where this execution waits (it
		// stops at the reserve, and a retry of it starts there again).
		return Step{Result: Result{Outcome: OutcomeRerunNotGranted, Record: cur}}, true
	}
	switch lastEvent(cur) {
	case HistoryRerunGranted, HistoryRerunStarting, HistoryRerunStarted, HistoryResolved:
		// A person allowed a retry since the key failed: with a re-run,
		// or without one (then a person's Retry in n8n is the next copy).
		return Step{}, false
	}
	res := Result{Outcome: OutcomeRerunNotGranted, Record: cur}
	if t := lastTransition(cur); t != nil && t.Event == HistoryRerunGate && t.By == req.Owner {
		res.Replayed = true
		return Step{Result: res}, true
	}
	next := cur.Clone()
	next.addHistory(Transition{At: now, Event: HistoryRerunGate, Attempt: cur.Attempt, By: req.Owner, Detail: "the execution waits at its re-run gate"})
	res.Record = next
	return Step{Record: next, Result: res}, true
}

// decideRerunGrant decides a person's "allow a retry and re-run the
// execution" (req.Rerun).
func decideRerunGrant(cur *Record, req ResolveRequest, np NamespacePolicy, now time.Time) (Step, error) {
	if cur.State != StateFailed || !cur.Retryable {
		return Step{}, errs.Errorf(errs.Conflict, "key is %s: a re-run applies to a failed key whose execution waits at its re-run gate; nothing changed", cur.State)
	}
	if _, granted := RerunGranted(cur); granted {
		return Step{Result: Result{Outcome: OutcomeFailed, Replayed: true, Record: cur}}, nil
	}
	holder := RerunHolder(cur)
	if holder == "" {
		return Step{}, errs.Errorf(errs.Conflict, "no execution of this key waits at a re-run gate (its workflow has none, or the key's last attempt did not reach it): "+
			"allow a retry without re-run, and its sender or a person sends the event again; nothing changed")
	}
	next := cur.Clone()
	next.ResolvedBy, next.ResolvedAt, next.Note = req.By, timePtr(now), req.Note
	next.ExpiresAt = timePtr(now.Add(np.Retention))
	next.UpdatedAt = now
	detail := "re-run of " + holder
	if req.Bulk != "" {
		detail = "bulk " + req.Bulk + ", " + detail
	}
	next.addHistory(Transition{At: now, Event: HistoryRerunGranted, Attempt: cur.Attempt, By: req.By, Detail: detail + ": " + truncate(req.Note, 200)})
	ev := Event{At: now, Kind: EventKeyResolved, Namespace: cur.Namespace, Key: cur.Key, Attempt: cur.Attempt,
		Owner: req.By, Message: string(StateFailed), Bulk: req.Bulk}
	return Step{Record: next, Events: []Event{ev}, Result: Result{Outcome: OutcomeFailed, Record: next}}, nil
}

// RerunHolder is the execution that waits at the key's re-run gate, as
// the gate's reserve named it; "" when none does (the key is not failed
// and retryable, or its last attempt did not stop at a gate, or a re-run
// was granted already). After n8n refused a re-run the execution still
// waits there.
func RerunHolder(r *Record) string {
	if r == nil || r.State != StateFailed || !r.Retryable {
		return ""
	}
	switch lastEvent(r) {
	case HistoryRerunGate, HistoryRerunRefused:
		return gateHolder(r)
	}
	return ""
}

// RerunGranted reports whether a person allowed a re-run of the key that
// no reserve has taken yet, and the execution to re-run.
func RerunGranted(r *Record) (string, bool) {
	if r == nil || r.State != StateFailed || !r.Retryable {
		return "", false
	}
	switch lastEvent(r) {
	case HistoryRerunGranted, HistoryRerunStarting, HistoryRerunStarted:
		return gateHolder(r), true
	}
	return "", false
}

// RerunStartedAs is the execution n8n started for the key's granted
// re-run ("" : not started yet).
func RerunStartedAs(r *Record) string {
	if t := lastTransition(r); t != nil && t.Event == HistoryRerunStarted {
		return t.Detail
	}
	return ""
}

// LastTransition is the newest history entry that is not an
// acknowledgement (nil: none).
func LastTransition(r *Record) *Transition { return lastTransition(r) }

// gateHolder is the execution of the key's newest gate entry.
func gateHolder(r *Record) string { return r.LastBy(HistoryRerunGate) }

// RerunClaimableAt is when a guard may claim the key's granted re-run
// (DecideClaimRerun): at once (zero) when no guard claimed it, else when
// its claim (claim) or the re-run n8n started without reserving the key
// (started) goes stale; false when no re-run of the key is granted.
func RerunClaimableAt(r *Record, claim, started time.Duration) (time.Time, bool) {
	if _, granted := RerunGranted(r); !granted {
		return time.Time{}, false
	}
	switch t := lastTransition(r); t.Event {
	case HistoryRerunStarting:
		return t.At.Add(claim), true
	case HistoryRerunStarted:
		return t.At.Add(started), true
	}
	return time.Time{}, true
}

// DecideClaimRerun decides a guard's claim of a granted re-run (see
// RerunStore.ClaimRerunHeld); the bool says whether it was claimed.
func DecideClaimRerun(cur *Record, by string, claim, started time.Duration, now time.Time) (Step, bool) {
	if at, granted := RerunClaimableAt(cur, claim, started); !granted || now.Before(at) {
		return Step{}, false
	}
	next := cur.Clone()
	t := Transition{At: now, Event: HistoryRerunStarting, Attempt: cur.Attempt, By: by, Detail: "asking n8n to re-run " + gateHolder(cur)}
	if h := next.History; len(h) > 0 && h[len(h)-1].Event == HistoryRerunStarting {
		// A stale claim taken again replaces its entry: an n8n outage of
		// hours does not fill the history with claims.
		t.Detail = "asking n8n again to re-run " + gateHolder(cur)
		h[len(h)-1] = t
	} else {
		next.addHistory(t)
	}
	return Step{Record: next, Result: Result{Outcome: OutcomeFound, Record: next}}, true
}

// DecideNoteRerun notes n8n's answer to a claimed re-run (see RerunStore).
func DecideNoteRerun(cur *Record, event HistoryEvent, detail string, now time.Time) (Step, bool, error) {
	if event != HistoryRerunStarted && event != HistoryRerunRefused {
		return Step{}, false, errs.Errorf(errs.InvalidRequest, "a re-run is noted as %s or %s, not %q", HistoryRerunStarted, HistoryRerunRefused, event)
	}
	if cur == nil {
		return Step{}, false, nil
	}
	last := lastEvent(cur)
	if _, granted := RerunGranted(cur); !granted || event == HistoryRerunStarted && last != HistoryRerunStarting {
		return Step{Result: Result{Outcome: OutcomeFound, Replayed: true, Record: cur}}, false, nil
	}
	next := cur.Clone()
	next.addHistory(Transition{At: now, Event: event, Attempt: cur.Attempt, By: "n8n-guard", Detail: truncate(detail, 200)})
	st := Step{Record: next, Result: Result{Outcome: OutcomeFound, Record: next}}
	if event == HistoryRerunRefused {
		// The person who allowed it was told the guard re-runs the
		// execution: a refusal must reach them, not only the history.
		granted, _ := lastOf(cur, HistoryRerunGranted)
		st.Events = []Event{{At: now, Kind: EventRerunRefused, Namespace: cur.Namespace, Key: cur.Key, Attempt: cur.Attempt,
			Owner: granted.By, Destination: cur.Destination, Message: truncate(detail, 200)}}
	}
	return st, true, nil
}

// A re-run's claim is held while its call is in flight, as a check's is
// (check.go): its holder extends it, so it never lapses while n8n is
// asked and no second guard asks n8n meanwhile (one grant, one retry); a
// guard that stops before it asked hands it back, and the key may be
// claimed again at once instead of after the claim's lapse. The holder
// names its claim by its name and the time its entry last got (to the
// millisecond, as ownClaim compares).
//
//	extend,  own claim, not answered -> the claim's entry dated now (never earlier)
//	release, own claim, not answered -> the claim's entry removed: the key is as before it
//	                                    (granted, or a started re-run gone stale), claimable at once
//	either, otherwise                -> refused, nothing written
//
// A handed-back claim leaves no entry: n8n was not asked, so nothing
// happened that the history should tell.

// ownRerunClaim reports whether cur's re-run is claimed by by at at and
// n8n's answer is not noted yet.
func ownRerunClaim(cur *Record, by string, at time.Time) bool {
	if _, granted := RerunGranted(cur); !granted {
		return false
	}
	t := lastTransition(cur)
	return t.Event == HistoryRerunStarting && t.By == by && t.At.Truncate(time.Millisecond).Equal(at.Truncate(time.Millisecond))
}

// DecideExtendRerunClaim extends by's re-run claim of at to now.
func DecideExtendRerunClaim(cur *Record, by string, at, now time.Time) (Step, bool) {
	if !ownRerunClaim(cur, by, at) {
		return Step{}, false
	}
	next := cur.Clone()
	if t := lastTransition(next); now.After(t.At) {
		t.At = now
	}
	return Step{Record: next, Result: Result{Outcome: OutcomeFound, Record: next}}, true
}

// DecideReleaseRerunClaim hands back by's re-run claim of at, whose call
// was not made.
func DecideReleaseRerunClaim(cur *Record, by string, at, now time.Time) (Step, bool) {
	if !ownRerunClaim(cur, by, at) {
		return Step{}, false
	}
	next := cur.Clone()
	i := len(next.History) - 1
	for acknowledgement(next.History[i].Event) {
		i-- // an acknowledgement after the claim stays
	}
	next.History = slices.Delete(next.History, i, i+1)
	return Step{Record: next, Result: Result{Outcome: OutcomeFound, Record: next}}, true
}

// ClaimRerunHeld implements RerunStore.
func (o *Operations) ClaimRerunHeld(ctx context.Context, ns, key, by string, claim, started time.Duration) (time.Time, bool, error) {
	return o.decideRerunClaim(ctx, "claim re-run", ns, key, func(cur *Record, now time.Time) (Step, bool) {
		return DecideClaimRerun(cur, by, claim, started, now)
	})
}

// ExtendRerunClaim implements RerunStore.
func (o *Operations) ExtendRerunClaim(ctx context.Context, ns, key, by string, at time.Time) (time.Time, bool, error) {
	return o.decideRerunClaim(ctx, "extend re-run claim", ns, key, func(cur *Record, now time.Time) (Step, bool) {
		return DecideExtendRerunClaim(cur, by, at, now)
	})
}

// ReleaseRerunClaim implements RerunStore.
func (o *Operations) ReleaseRerunClaim(ctx context.Context, ns, key, by string, at time.Time) (bool, error) {
	_, ok, err := o.decideRerunClaim(ctx, "release re-run claim", ns, key, func(cur *Record, now time.Time) (Step, bool) {
		return DecideReleaseRerunClaim(cur, by, at, now)
	})
	return ok, err
}

// decideRerunClaim runs one decision on a re-run's claim: whether it was
// taken, and the time of the claim it left (zero when refused; a
// hand-back's is of no use).
func (o *Operations) decideRerunClaim(ctx context.Context, name, ns, key string, decide func(*Record, time.Time) (Step, bool)) (time.Time, bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return time.Time{}, false, err
	}
	taken := false
	res, err := o.Driver.DecideKey(ctx, Op{Name: name, Namespace: ns, Key: key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			st, ok := decide(cur, now)
			taken = ok
			return st, nil
		}})
	if err != nil || !taken {
		return time.Time{}, false, err
	}
	var at time.Time
	if t := lastTransition(res.Record); t != nil && t.Event == HistoryRerunStarting {
		at = t.At
	}
	return at, true, nil
}

// NoteRerun implements RerunStore.
func (o *Operations) NoteRerun(ctx context.Context, ns, key string, event HistoryEvent, detail string) (bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return false, err
	}
	noted := false
	_, err = o.Driver.DecideKey(ctx, Op{Name: "note re-run", Namespace: ns, Key: key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			st, ok, err := DecideNoteRerun(cur, event, detail, now)
			noted = ok
			return st, err
		}})
	return noted && err == nil, err
}
