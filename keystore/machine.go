package keystore

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Step is what one decision asks a store to write, atomically with the
// read it was based on. nil fields mean "leave as is". Stores (keystore/bolt,
// keystore/postgres) load cur and the breaker, call one Decide function and
// write its Step; they never decide themselves.
type Step struct {
	Record  *Record  // the key's new record
	Breaker *Breaker // the destination's new breaker
	Events  []Event  // events to append to the feed
	Result  Result   // the answer, given once the write is durable
}

// The state machine of a key. Every function here is pure but for the
// random token: it reads cur (nil when the key is absent) and returns the
// Step; it never mutates its inputs. Each request must have been through
// its Normalize method first.
//
//	reserve:  absent            -> reserved (accepted, attempt 1)
//	          reserved, live    -> in_progress | same request_id: accepted again, same token (a repeat; no write)
//	          reserved, expired -> unknown (state_unknown) | reclaim: reserved (accepted, attempt+1)
//	          completed         -> duplicate_event
//	          failed, retryable -> reserved (accepted, attempt+1); at its re-run gate: rerun_not_granted (rerun.go)
//	          failed, final     -> rejected
//	          unknown           -> state_unknown
//	complete: reserved|unknown  -> completed (current token only)
//	fail:     reserved|unknown  -> failed (destination_failed|rejected) | unknown (state_unknown)
//	resolve:  unknown|failed (|reserved with force or expired lease) -> completed | failed+retryable | final: failed (event key_resolved)
//	          parked: see resolve_parked.go (one rule at every door)
//	          the same resolution by the same person again -> the same answer (a repeat; no write)
//	re-runs:  see rerun.go
//	sweep:    reserved, expired, policy unknown -> unknown
//	parked:   see park.go
//	unknown where a check is configured: see check.go
//	approval: see approval.go
//	a reserve naming, or a fail about a key of, a destination limited to
//	other namespaces: forbidden, nothing written (breaker.go)

// DecideReserve decides a reserve of a key whose record is cur, under the
// breaker br of the request's destination (nil without one).
func DecideReserve(cur *Record, br *Breaker, req ReserveRequest, fp Fingerprint, np NamespacePolicy, now time.Time) (s Step, err error) {
	defer func() { s.Result.Namespace, s.Result.Key = req.Namespace, req.Key }()
	if dp := np.destination(req.Destination); !dp.Admits(req.Namespace) {
		return Step{}, refuseDestination(req.Namespace, req.Destination, dp)
	}
	if cur != nil && fp.Conflicts(cur.Fingerprint) {
		return Step{}, errs.Errorf(errs.KeyReused, "key %q was used before with a different payload; nothing changed", req.Key)
	}
	if st, ok := decideRerunGate(cur, req, now); ok {
		return st, nil // rerun.go: a key at its re-run gate, or the gate itself
	}
	if cur == nil {
		if np.Approval.Required {
			return requestApproval(req, fp, now) // approval.go
		}
		return startAttempt(cur, br, req, fp, np, now, 1)
	}
	switch cur.State {
	case StateReserved:
		if now.Before(*cur.LeaseExpiresAt) {
			// The holder asking again (its answer was lost, or n8n's Retry
			// On Fail repeated the request) gets what it was given.
			if token, ok := unsealToken(cur, req); ok {
				return Step{Result: Result{Outcome: OutcomeAccepted, Proceed: true, Token: token, Replayed: true, Record: cur}}, nil
			}
			return Step{Result: Result{Outcome: OutcomeInProgress, RetryAfter: cur.LeaseExpiresAt.Sub(now), Record: cur}}, nil
		}
		if np.OnLeaseExpiry == ExpireReclaim {
			return startAttempt(cur, br, req, fp, np, now, cur.Attempt+1)
		}
		next, evs := leaseExpired(cur, np, now)
		return Step{Record: next, Events: evs, Result: Result{Outcome: OutcomeStateUnknown, Record: next}}, nil
	case StateCompleted:
		return Step{Result: Result{Outcome: OutcomeDuplicate, Replayed: true, Record: cur}}, nil
	case StateFailed:
		if cur.Retryable {
			return startAttempt(cur, br, req, fp, np, now, cur.Attempt+1)
		}
		return Step{Result: Result{Outcome: OutcomeRejected, Record: cur}}, nil
	case StateUnknown:
		return Step{Result: Result{Outcome: OutcomeStateUnknown, Record: cur}}, nil
	case StateParked:
		return reserveParked(cur, br, req, fp, np, now)
	}
	return Step{}, fmt.Errorf("reserve %s/%s: record in impossible state %q", req.Namespace, req.Key, cur.State)
}

// startAttempt hands out a new attempt unless the destination's breaker
// pauses it; a paused reserve records nothing about the key.
func startAttempt(cur *Record, br *Breaker, req ReserveRequest, fp Fingerprint, np NamespacePolicy, now time.Time, attempt int) (Step, error) {
	if err := approvedContent(cur, fp, np); err != nil {
		return Step{}, err // approval.go
	}
	lease := req.Lease.Truncate(time.Millisecond)
	if lease <= 0 {
		lease = np.Lease
	}
	var s Step
	if br != nil {
		b := br.Clone()
		if ev := b.demote(req.Namespace, now); ev != nil {
			s.Events = append(s.Events, *ev)
		}
		ok, wait := b.admit(req.Namespace, req.Key, lease, req.ResumeURL != "", now)
		s.Breaker = b
		if !ok && req.ResumeURL != "" {
			// The execution waits in n8n; the guard resumes it (park.go).
			s.Record = park(cur, b, req.Namespace, req.Key, req.Owner, req.Destination, req.ResumeURL, attempt-1, fp, "destination "+req.Destination+" paused", now)
			s.Record.takeSummary(cur, req.Summary)
			s.Result = parkedResult(s.Record, b, now)
			return s, nil
		}
		if !ok {
			s.Result = Result{Outcome: OutcomeDestinationPaused, RetryAfter: wait, Record: cur}
			if b.State == BreakerClosed {
				s.Result.PausedFor = PausedNamespace // other namespaces still write
			}
			return s, nil
		}
	}
	next := cur.Clone()
	if next == nil {
		next = &Record{Namespace: req.Namespace, Key: req.Key, CreatedAt: now}
	}
	if cur != nil && cur.State == StateReserved {
		next.addHistory(Transition{At: now, Event: HistoryLeaseExpired, Attempt: cur.Attempt, By: cur.Owner, Detail: "reclaimed"})
	}
	token := newToken(attempt)
	next.State = StateReserved
	next.Attempt = attempt
	next.Owner = req.Owner
	next.LeaseExpiresAt = timePtr(now.Add(lease))
	next.ResultRef, next.Result, next.Reason, next.Message, next.Retryable, next.Via = "", nil, "", "", false, ""
	next.Destination = req.Destination
	next.ExpiresAt = nil
	next.UpdatedAt = now
	next.TokenHash = hashToken(token)
	next.TokenSeal = sealToken(token, req, attempt)
	next.ParkedAt, next.ResumeURL, next.ResumeSentAt, next.ResumeClaimUntil = nil, "", nil, nil
	// The woken execution of a parked event: its wait goes on should its
	// write meet the destination down again and park (park.go).
	next.ParkedSince = waitGoesOn(cur)
	if len(next.Fingerprint) == 0 {
		next.Fingerprint = fp
	}
	next.takeSummary(cur, req.Summary)
	next.addHistory(Transition{At: now, Event: HistoryReserved, Attempt: attempt, By: req.Owner})
	s.Record = next
	s.Result = Result{Outcome: OutcomeAccepted, Proceed: true, Token: token, Record: next}
	return s, nil
}

// takeSummary records the summary of a reserve that starts an attempt,
// parks it or asks for its approval: the key says what its current attempt
// is about. A reserve without one keeps what was recorded, since the key is
// still the same event (an approved key's woken execution may come from a
// workflow that does not send it). A reserve that starts nothing (a
// duplicate of a completed key, a copy while one is in progress or awaits
// approval) writes nothing, so it never changes the summary. Nor does the
// reserve of an approved key's woken execution: the key keeps the summary
// the approvers judged (cur is the record before the reserve).
func (r *Record) takeSummary(cur *Record, summary string) {
	if summary != "" && (cur == nil || cur.Reason != ReasonApproved) {
		r.Summary = summary
	}
}

func leaseExpired(cur *Record, np NamespacePolicy, now time.Time) (*Record, []Event) {
	next := cur.Clone()
	next.State, next.ParkedSince = StateUnknown, nil
	next.Reason = ReasonLeaseExpired
	next.Message = "the lease ran out before the holder reported an outcome"
	next.UpdatedAt = now
	next.addHistory(Transition{At: now, Event: HistoryLeaseExpired, Attempt: cur.Attempt, By: cur.Owner})
	if holdForCheck(next, np, "", now) {
		return next, nil // the page waits for the check (check.go)
	}
	return next, []Event{{At: now, Kind: EventKeyUnknown, Namespace: cur.Namespace, Key: cur.Key,
		Attempt: cur.Attempt, Owner: cur.Owner, Destination: cur.Destination, Reason: ReasonLeaseExpired, Message: next.Message}}
}

// DecideLeaseExpiry is the sweeper's proactive form of the lease rule.
func DecideLeaseExpiry(cur *Record, np NamespacePolicy, now time.Time) (Step, bool) {
	if cur == nil || cur.State != StateReserved || now.Before(*cur.LeaseExpiresAt) || np.OnLeaseExpiry == ExpireReclaim {
		return Step{}, false
	}
	next, evs := leaseExpired(cur, np, now)
	return Step{Record: next, Events: evs}, true
}

// checkHolder applies the fencing rule: only the current attempt's token
// may report on the key.
func checkHolder(cur *Record, ns, key, token string) error {
	if cur == nil {
		return errs.Errorf(errs.NotFound, "no key %q in namespace %q", key, ns)
	}
	if subtle.ConstantTimeCompare(hashToken(token), cur.TokenHash) != 1 {
		return errs.Errorf(errs.StaleToken, "the token is not the current attempt's (attempt %d); a newer attempt or a person has taken over this key", cur.Attempt)
	}
	return nil
}

// DecideComplete decides the holder's report that its attempt took effect.
func DecideComplete(cur *Record, br *Breaker, req CompleteRequest, np NamespacePolicy, now time.Time) (s Step, err error) {
	defer func() { s.Result.Namespace, s.Result.Key = req.Namespace, req.Key }()
	if err := checkHolder(cur, req.Namespace, req.Key, req.Token); err != nil {
		return Step{}, err
	}
	switch cur.State {
	case StateCompleted:
		return Step{Result: Result{Outcome: OutcomeCompleted, Replayed: true, Record: cur}}, nil
	case StateFailed, StateParked:
		return Step{}, errs.Errorf(errs.Conflict, "attempt %d already reported failure (%s); reserve again to start a new attempt", cur.Attempt, cur.Reason)
	}
	next := cur.Clone()
	detail := ""
	if cur.State == StateUnknown {
		detail = "late confirmation by the holder"
	}
	next.State, next.Check, next.ParkedSince = StateCompleted, nil, nil
	next.ResultRef, next.Result, next.Via = req.ResultRef, req.Result, req.Via
	next.Reason, next.Message, next.Retryable = "", "", false
	next.LeaseExpiresAt = nil
	next.ExpiresAt = timePtr(now.Add(np.Retention))
	next.UpdatedAt = now
	next.addHistory(Transition{At: now, Event: HistoryCompleted, Attempt: cur.Attempt, By: cur.Owner, Detail: detail})
	s = Step{Record: next, Result: Result{Outcome: OutcomeCompleted, Record: next}}
	if br != nil && np.destination(cur.Destination).Admits(cur.Namespace) {
		b := br.Clone()
		if ev := b.succeeded(cur.Namespace, cur.Key, now); ev != nil {
			s.Events = append(s.Events, *ev)
		}
		s.Breaker = b
	}
	return s, nil
}

// DecideFail decides the holder's report that its attempt failed or that
// nobody knows; dp is the policy of br's destination.
func DecideFail(cur *Record, br *Breaker, req FailRequest, np NamespacePolicy, dp DestinationPolicy, now time.Time) (s Step, err error) {
	defer func() { s.Result.Namespace, s.Result.Key = req.Namespace, req.Key }()
	if err := checkHolder(cur, req.Namespace, req.Key, req.Token); err != nil {
		return Step{}, err
	}
	if br != nil && !dp.Admits(cur.Namespace) {
		// A key recorded before its destination was limited.
		return Step{}, refuseDestination(cur.Namespace, cur.Destination, dp)
	}
	state, retryable := StateFailed, true
	switch req.Reason {
	case ReasonValidationFailed:
		retryable = false
	case ReasonOutcomeUnknown:
		state, retryable = StateUnknown, false
	}
	if req.Retryable != nil && state == StateFailed {
		retryable = retryable && *req.Retryable
	}
	outcome := failOutcome(state, retryable)
	switch cur.State {
	case StateCompleted:
		return Step{}, errs.Errorf(errs.Conflict, "attempt %d already completed; a completed key cannot fail", cur.Attempt)
	case StateFailed:
		if cur.Reason == req.Reason && cur.Retryable == retryable && state == StateFailed {
			return Step{Result: Result{Outcome: outcome, Replayed: true, Record: cur}}, nil
		}
		return Step{}, errs.Errorf(errs.Conflict, "attempt %d already failed with %s", cur.Attempt, cur.Reason)
	case StateUnknown:
		if state == StateUnknown {
			if cur.Check != nil && cur.Check.ResumeURL == "" && req.ResumeURL != "" {
				// The sweeper made the key unknown before the holder's own
				// fail arrived: keep where its execution waits, so that a
				// check's "absent" parks it instead of stranding it.
				next := cur.Clone()
				next.Check.ResumeURL, next.UpdatedAt = req.ResumeURL, now
				return Step{Record: next, Result: Result{Outcome: outcome, Replayed: true, Record: next}}, nil
			}
			return Step{Result: Result{Outcome: outcome, Replayed: true, Record: cur}}, nil
		}
	case StateParked:
		if cur.Reason == req.Reason && state == StateFailed && retryable {
			return Step{Result: Result{Outcome: OutcomeParked, RetryAfter: catchUpWait(br, cur.Namespace, now), Replayed: true, Record: cur}}, nil
		}
		return Step{}, errs.Errorf(errs.Conflict, "attempt %d already failed with %s and is parked", cur.Attempt, cur.Reason)
	}
	next := cur.Clone()
	next.State, next.Reason, next.Message, next.Retryable = state, req.Reason, req.Message, retryable
	next.LeaseExpiresAt, next.Check, next.ParkedSince = nil, nil, nil
	next.UpdatedAt = now
	if state == StateFailed {
		next.ExpiresAt = timePtr(now.Add(np.Retention))
	}
	event := HistoryFailed // said, not cast from the state
	if state == StateUnknown {
		event = HistoryUnknown
	}
	next.addHistory(Transition{At: now, Event: event, Attempt: cur.Attempt, By: cur.Owner, Detail: string(req.Reason)})
	s = Step{Record: next, Result: Result{Outcome: outcome, Record: next}}
	if state == StateUnknown && !holdForCheck(next, np, req.ResumeURL, now) {
		s.Events = append(s.Events, Event{At: now, Kind: EventKeyUnknown, Namespace: cur.Namespace, Key: cur.Key,
			Attempt: cur.Attempt, Owner: cur.Owner, Destination: cur.Destination, Reason: req.Reason, Message: req.Message})
	}
	if br != nil {
		b := br.Clone()
		if ev := b.failed(cur.Namespace, cur.Key, req.Reason, req.Message, dp, now); ev != nil {
			s.Events = append(s.Events, *ev)
		}
		s.Breaker = b
		if req.ResumeURL != "" && state == StateFailed && retryable && b.StateFor(cur.Namespace, now) != BreakerClosed {
			// The execution waits in n8n; the guard resumes it (park.go).
			p := park(cur, b, cur.Namespace, cur.Key, cur.Owner, cur.Destination, req.ResumeURL, cur.Attempt, nil, string(req.Reason), now)
			p.Reason, p.Message = req.Reason, req.Message
			s.Record, s.Result = p, parkedResult(p, b, now)
		}
	}
	return s, nil
}

func failOutcome(state State, retryable bool) Outcome {
	switch {
	case state == StateUnknown:
		return OutcomeStateUnknown
	case retryable:
		return OutcomeDestinationFailed
	}
	return OutcomeRejected
}

// DecideResolve decides a person's resolution of a key.
func DecideResolve(cur *Record, req ResolveRequest, np NamespacePolicy, now time.Time) (s Step, err error) {
	defer func() { s.Result.Namespace, s.Result.Key = req.Namespace, req.Key }()
	if cur == nil {
		return Step{}, errs.Errorf(errs.NotFound, "no key %q in namespace %q", req.Key, req.Namespace)
	}
	if req.Attempt != 0 && req.Attempt != cur.Attempt {
		return Step{}, errs.Errorf(errs.Conflict, "key is at attempt %d now, not %d: the decision was about an attempt that is over; nothing changed", cur.Attempt, req.Attempt)
	}
	if ApprovalReason(cur.Reason) && cur.Reason != ReasonApproved {
		// A resolution would let the next copy write without anybody's
		// approval, or undo a rejection: approvals decide these keys.
		return Step{}, errs.Errorf(errs.Conflict, "key %s: approve or reject it (POST /v1/approve, /v1/reject); a resolution does not decide an approval", cur.Reason)
	}
	if err := ResolveParked(cur, req.Force); err != nil {
		return Step{}, err // resolve_parked.go
	}
	if req.Rerun {
		return decideRerunGrant(cur, req, np, now) // rerun.go
	}
	switch cur.State {
	case StateCompleted:
		if req.Resolution == StateCompleted {
			return Step{Result: Result{Outcome: OutcomeCompleted, Replayed: true, Record: cur}}, nil
		}
		return Step{}, errs.Errorf(errs.Conflict, "key is completed; a completed key is not reopened")
	case StateFailed, StateParked:
		if req.Resolution == StateFailed && cur.Retryable && cur.ResolvedBy == req.By && cur.Note == req.Note && lastEvent(cur) == HistoryResolved {
			return Step{Result: Result{Outcome: OutcomeFailed, Replayed: true, Record: cur}}, nil
		}
	case StateReserved:
		if !req.Force && now.Before(*cur.LeaseExpiresAt) {
			return Step{}, errs.Errorf(errs.Conflict, "key is reserved by a live attempt (owner %q) until %s; wait, or resolve with force", cur.Owner, cur.LeaseExpiresAt.Format(time.RFC3339))
		}
	}
	next := cur.Clone()
	next.State = req.Resolution
	next.LeaseExpiresAt, next.Check = nil, nil
	next.ParkedAt, next.ParkedSince, next.ResumeURL, next.ResumeSentAt, next.ResumeClaimUntil = nil, nil, "", nil, nil
	next.ResolvedBy, next.ResolvedAt, next.Note = req.By, timePtr(now), req.Note
	next.ExpiresAt = timePtr(now.Add(np.Retention))
	next.UpdatedAt = now
	outcome := OutcomeCompleted
	if req.Resolution == StateCompleted {
		if req.ResultRef != "" {
			next.ResultRef = req.ResultRef
		}
		next.Reason, next.Message, next.Retryable = "", "", false
	} else {
		next.Retryable = !req.Final
		outcome = OutcomeFailed
	}
	detail := string(req.Resolution)
	if req.Final {
		detail = "failed for good"
	}
	if req.Bulk != "" {
		detail = "bulk " + req.Bulk + ", " + detail
	}
	detail = leftWaiting(cur) + detail
	next.addHistory(Transition{At: now, Event: HistoryResolved, Attempt: cur.Attempt, By: req.By, Detail: detail + ": " + truncate(req.Note, 200)})
	ev := Event{At: now, Kind: EventKeyResolved, Namespace: cur.Namespace, Key: cur.Key, Attempt: cur.Attempt,
		Owner: req.By, Message: string(req.Resolution), Bulk: req.Bulk}
	return Step{Record: next, Events: []Event{ev}, Result: Result{Outcome: outcome, Record: next}}, nil
}

// newToken makes the fencing token of an attempt: the attempt number (so a
// downstream system can order writes) and 128 random bits (so nobody can
// guess it).
func newToken(attempt int) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return fmt.Sprintf("%d.%s", attempt, hex.EncodeToString(b[:]))
}

// lastEvent is the event of the newest history entry that is not an
// acknowledgement (ack.go): an acknowledgement changes nothing about the
// key, so a replayed decision after one is still a replay.
func lastEvent(r *Record) HistoryEvent {
	if t := lastTransition(r); t != nil {
		return t.Event
	}
	return ""
}

func lastTransition(r *Record) *Transition {
	for i := len(r.History) - 1; i >= 0; i-- {
		if !acknowledgement(r.History[i].Event) {
			return &r.History[i]
		}
	}
	return nil
}

// sealToken keeps a token recoverable by the one request that received
// it, and by nothing else: its random part XOR a pad derived from the
// request_id and the principal that sent it (and the key and attempt, so
// one request_id unseals nothing elsewhere). Without a request_id there is
// no seal and the token is handed out once, as before. Only the same
// principal sending the same request_id gets the token again; a reader of
// the database who does not know both cannot unseal it, and the token hash
// alone still decides.
func sealToken(token string, req ReserveRequest, attempt int) []byte {
	if req.RequestID == "" {
		return nil
	}
	_, random, _ := strings.Cut(token, ".")
	b, err := hex.DecodeString(random)
	if err != nil {
		panic("a token made by newToken is always hex: " + err.Error())
	}
	pad := sealPad(req.Namespace, req.Key, req.RequestID, req.Principal, attempt)
	for i := range b {
		b[i] ^= pad[i]
	}
	return b
}

// unsealToken recovers the token of cur's attempt with the request_id of
// req; false when there is none or it is another request's.
func unsealToken(cur *Record, req ReserveRequest) (string, bool) {
	if req.RequestID == "" || len(cur.TokenSeal) != 16 {
		return "", false
	}
	pad := sealPad(cur.Namespace, cur.Key, req.RequestID, req.Principal, cur.Attempt)
	b := make([]byte, len(cur.TokenSeal))
	for i := range b {
		b[i] = cur.TokenSeal[i] ^ pad[i]
	}
	token := fmt.Sprintf("%d.%s", cur.Attempt, hex.EncodeToString(b))
	if subtle.ConstantTimeCompare(hashToken(token), cur.TokenHash) != 1 {
		return "", false
	}
	return token, true
}

// sealPad binds the seal to who reserved as well: a request_id is
// guessable (an execution id and a node name), so another token sending it
// must not unseal the holder's token. Without a principal the pad is what
// it was before principals were sealed in.
func sealPad(ns, key, requestID, principal string, attempt int) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "n8n-guard token seal\x00%s\x00%s\x00%d\x00%s", ns, key, attempt, requestID)
	if principal != "" {
		fmt.Fprintf(h, "\x00%s", principal)
	}
	return h.Sum(nil)[:16]
}

func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:16]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
