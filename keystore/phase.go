package keystore

// ParkedPhase names where a parked key stands: the stages (stage.go) of
// a parked key. Its State says "parked" for a key waiting for its
// destination, one whose resume call a guard holds, one whose execution
// n8n woke, one n8n lost and one waiting for a person; the Decide
// functions tell them apart by its fields. PhaseOf reads it off those
// fields the way they do (and the stores' queue of resumable keys,
// keystore/bolt resumable, keystore/postgres queuedSQL); StageOf
// stores it with every write of the key, and migration 0020 of
// keystore/postgres (guard_key_stage) is PhaseOf in SQL.
type ParkedPhase = Stage

// The phases of a parked key.
const (
	// PhaseWaiting: in the catch-up runner's queue (the stores' resumable
	// keys), nobody holds its resume call; its reserve is answered parked
	// while the destination's breaker is not closed.
	PhaseWaiting ParkedPhase = "waiting"
	// PhaseClaimed: a guard claimed its resume call (DecideClaimResume),
	// so the call may have been sent: its reserve goes through to the
	// breaker. A lapsed claim is still claimed: the call may have woken
	// the execution before its guard died, and another guard may claim it
	// again.
	PhaseClaimed ParkedPhase = "claimed"
	// PhaseProbe: claimed, and its destination breaker's probe: the
	// breaker, half open, waits for this key's execution (PhaseWith only:
	// the breaker is another record).
	PhaseProbe ParkedPhase = "probe"
	// PhaseResumed: n8n accepted the resume call (ResumeSentAt); the
	// woken execution is to reserve again, or is found silent
	// (WokenSilent). Out of the runner's queue.
	PhaseResumed ParkedPhase = "resumed"
	// PhaseLost: reason resume_lost: n8n no longer holds the execution,
	// the woken one went silent, or the destination no longer admits the
	// namespace. Its owner was told; no guard resumes it again, only a
	// copy its source sends again or a person moves it on.
	PhaseLost ParkedPhase = "lost"
	// PhaseAwaitingApproval, PhaseApproved, PhaseRejected: the approval
	// life cycle (approval.go), told by the reason for the key's whole
	// life in it, its resume call claimed or sent or not: these keys are
	// the approval resumer's, never in the runner's queue, never found
	// silent.
	PhaseAwaitingApproval ParkedPhase = "awaiting_approval"
	PhaseApproved         ParkedPhase = "approved"
	PhaseRejected         ParkedPhase = "rejected"
)

// PhaseOf returns the phase of the parked key r, "" when r is not parked.
// A probe is PhaseClaimed here; PhaseWith tells it.
func PhaseOf(r *Record) ParkedPhase {
	switch {
	case r == nil || r.State != StateParked:
		return ""
	case r.Reason == ReasonResumeLost: // before resumed: a silent key keeps ResumeSentAt
		return PhaseLost
	case r.Reason == ReasonAwaitingApproval:
		return PhaseAwaitingApproval
	case r.Reason == ReasonApproved:
		return PhaseApproved
	case r.Reason == ReasonApprovalRejected:
		return PhaseRejected
	case r.ResumeSentAt != nil:
		return PhaseResumed
	case woken(r): // a claim, as reserveParked reads it
		return PhaseClaimed
	}
	return PhaseWaiting
}

// PhaseWith is PhaseOf told with br, the breaker of r's destination (nil:
// none): a claimed key that is br's probe is PhaseProbe, as
// DecideClaimResume, DecideResumeAnswered and the breaker's admit read it
// (by namespace and key, whatever the breaker's state). Once n8n accepted
// its call the key is PhaseResumed, probe or not.
func PhaseWith(r *Record, br *Breaker) ParkedPhase {
	p := PhaseOf(r)
	if p == PhaseClaimed && br != nil && br.isProbe(r.Namespace, r.Key) {
		return PhaseProbe
	}
	return p
}
