package keystore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Approval before writing: in a namespace that requires it (namespace
// policy approval), the first reserve of an event does not start an
// attempt. The execution waits in n8n (a Wait node, as for parking) and
// the key is parked awaiting a person's approval: a sub-state of parked,
// told by its reason, so every store, listing, count and console view of
// parked keys holds it without a new column, and a copy of the event finds
// it like any parked key. The catch-up runner leaves these keys alone
// (ApprovalReason); the approval resumer (catchup/approval.go) resumes them
// once decided.
//
//	reserve, key absent, with resume_url     -> parked, reason awaiting_approval (outcome parked; event approval_requested)
//	reserve, key absent, without resume_url  -> refused: approval_required (nothing written)
//	reserve, key absent, without payload or fingerprint -> refused: invalid_request (nothing written)
//	reserve of a key awaiting approval       -> parked (no write): copies make no second request
//	approve (not the requester, four eyes)   -> parked, reason approved: the key is resumable
//	reserve of an approved key, not woken    -> parked (no write); woken (its resume claimed) -> reserved (accepted) through the breaker
//	an attempt of a key requested with content, without it | with other -> refused: invalid_request | key_reused
//	reject (with a reason)                   -> parked, reason approval_rejected, final: the execution is resumed so it ends
//	reserve of a rejected key                -> rejected (no write)
//	resume of a rejected key answered|lost   -> failed, reason approval_rejected, not retryable
//	approve|reject again, or after the key moved on -> the same answer, replayed (no write) | conflict for the other decision
//
// An approval is of the event: once approved, a failed retryable attempt
// is retried without asking again; a person resolving a rejected key as
// failed and retryable lets it be written without asking again too.
//
// An approval is of the content: the request must carry the event's
// payload or fingerprint (what the approvers approve is its hash), and
// every attempt that writes the key must carry the same, so the write
// cannot be another event's than the one approved.

// Reasons of a key in the approval life cycle; never sent by a client.
const (
	ReasonAwaitingApproval Reason = "awaiting_approval"
	ReasonApproved         Reason = "approved"
	ReasonApprovalRejected Reason = "approval_rejected"
)

// History events of approvals.
const (
	HistoryApprovalRequested HistoryEvent = "approval_requested"
	HistoryApproved          HistoryEvent = "approved"
	HistoryApprovalRejected  HistoryEvent = "approval_rejected"
)

// Events of approvals, for notify: a request goes to the approvers; a
// decision updates their messages (Owner is who decided, Message the
// decision: "approved" or "rejected").
const (
	EventApprovalRequested EventKind = "approval_requested"
	EventApprovalDecided   EventKind = "approval_decided"
)

// OutcomeApproved answers an approval.
const OutcomeApproved Outcome = "approved"

// ApprovalPolicy is a namespace's rule for approval before writing.
type ApprovalPolicy struct {
	// Required: every new event of the namespace waits for a person's
	// approval before it is written. Who may approve is not the domain's
	// rule: the API's scope, the console's roles, and in Slack the
	// namespace's approvers (notify).
	Required bool
	// FourEyes: whoever triggered the event (requested_by on the reserve)
	// may not approve or reject it. The config's default is true.
	FourEyes bool
}

// ApprovalReason reports whether r is a reason of the approval life cycle:
// such a parked key is not the catch-up runner's to resume.
func ApprovalReason(r Reason) bool {
	return r == ReasonAwaitingApproval || r == ReasonApproved || r == ReasonApprovalRejected
}

// ApprovalRequest is a person's approval or rejection of a key.
type ApprovalRequest struct {
	Namespace string `json:"namespace" validate:"namespace"`
	Key       string `json:"key"`                                                      // NormalizeKey
	By        string `json:"by" validate:"required,max=128,utf8,no_control,no_format"` // trimmed first
	// Note: why; required to reject.
	Note string `json:"note" validate:"max=2000,utf8"`
	// Identities are the names of the deciding person that a sign-in or a
	// token vouches for (a Slack user ID and name, the e-mail and subject
	// an identity provider gave, a token's person), compared with the
	// requester by four eyes (person.go). Normalize spells them as
	// CanonicalPerson does and refuses one that breaks the person rule.
	// Only these make the decider a person people: knows.
	Identities []string `json:"-"`
	// Claimed are spellings the decider gave that nobody vouched for (a
	// shared token's by, a Slack user's chosen name). Four eyes refuses
	// when one of them is the requester, but they never make the decider
	// known to people:, nor name a person there.
	Claimed []string `json:"-"`
}

// Normalize applies the input rules; reject says whether a note is needed.
func (r ApprovalRequest) Normalize(reject bool) (ApprovalRequest, error) {
	var v violations
	r.Key = v.key(r.Key)
	r.By, r.Note = strings.TrimSpace(r.By), strings.TrimSpace(r.Note)
	v.check(r)
	// by is how the history names the decider ("Ana (Slack U0ANA)"); the
	// identities are who they are, by itself when nothing vouched for more.
	// A request that carries neither (a store called directly, an API
	// without tokens) is decided by whoever by names.
	given := r.Identities
	if len(given) == 0 && len(r.Claimed) == 0 {
		given = []string{r.By}
	}
	r.Identities = v.persons(given)
	r.Claimed = v.persons(r.Claimed)
	if reject && r.Note == "" {
		v.field("note", "required", "a rejection needs its reason in note")
	}
	return r, v.err()
}

// persons spells each identity as CanonicalPerson does, dropping empty
// ones and repeats, and records one that breaks the person rule (once,
// under by).
func (v *violations) persons(given []string) []string {
	ids := make([]string, 0, len(given))
	for _, id := range given {
		if id = CanonicalPerson(id); id == "" || slices.Contains(ids, id) {
			continue
		}
		if err := CheckPerson("by", id); err != nil {
			if !slices.ContainsFunc(v.fields, func(f errs.FieldError) bool { return f.Field == "by" }) {
				v.add(err)
			}
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

// RequestedBy is who triggered the event of a key in the approval life
// cycle (the reserve's requested_by), "" when not known.
func RequestedBy(r *Record) string { return r.LastBy(HistoryApprovalRequested) }

// lastOf is the latest history entry of kind ev.
func lastOf(r *Record, ev HistoryEvent) (Transition, bool) {
	if i := r.lastIndexOf(ev); i >= 0 {
		return r.History[i], true
	}
	return Transition{}, false
}

// requestApproval decides the first reserve of an event in a namespace
// that requires approval.
func requestApproval(req ReserveRequest, fp Fingerprint, now time.Time) (Step, error) {
	if req.ResumeURL == "" {
		return Step{}, errs.Errorf(errs.ApprovalRequired,
			"namespace %q requires a person's approval before writing: reserve with resume_url (a Wait node \"On Webhook Call\") so the execution can wait for it; nothing was recorded", req.Namespace)
	}
	if len(fp) == 0 {
		return Step{}, errs.InvalidField("payload", "required_without=fingerprint", fmt.Sprintf(
			"namespace %q requires a person's approval before writing: send the event's payload (or your fingerprint of it), so that what is written is what was approved; nothing was recorded", req.Namespace))
	}
	next := &Record{Namespace: req.Namespace, Key: req.Key, CreatedAt: now, State: StateParked,
		Owner: req.Owner, Destination: req.Destination, ResumeURL: req.ResumeURL, ParkedAt: timePtr(now),
		Reason: ReasonAwaitingApproval, Message: "waits for a person's approval before it is written",
		Retryable: true, UpdatedAt: now, Fingerprint: fp, Summary: req.Summary}
	by := req.RequestedBy
	next.addHistory(Transition{At: now, Event: HistoryApprovalRequested, By: by, Detail: "requested by " + cmpOr(req.RequestedBy, "(not said)") + ", owner " + cmpOr(req.Owner, "(none)")})
	ev := Event{At: now, Kind: EventApprovalRequested, Namespace: req.Namespace, Key: req.Key,
		Owner: req.Owner, Destination: req.Destination, Reason: ReasonAwaitingApproval, Message: req.RequestedBy, Summary: req.Summary}
	return Step{Record: next, Events: []Event{ev}, Result: Result{Outcome: OutcomeParked, Record: next}}, nil
}

// approvedContent is the rule that binds an approval to its content: in a
// namespace that requires approval, an attempt of a key recorded with a
// fingerprint must carry the same one (of the same kind: a payload where
// the request sent a payload). A key with none was recorded before the
// namespace required approval and is left as it was.
func approvedContent(cur *Record, fp Fingerprint, np NamespacePolicy) error {
	switch {
	case !np.Approval.Required || cur == nil || len(cur.Fingerprint) == 0:
		return nil
	case len(fp) == 0:
		return errs.InvalidField("payload", "required_without=fingerprint", fmt.Sprintf(
			"the approval of key %q (namespace %q) is of the content it was requested with: send the same payload (or fingerprint) with every reserve that writes it; nothing changed", cur.Key, cur.Namespace))
	case !bytes.Equal(fp, cur.Fingerprint):
		return errs.Errorf(errs.KeyReused, "key %q was requested for approval with other content than this reserve carries (its payload or fingerprint differs, or one was sent where the request sent the other); nothing changed", cur.Key)
	}
	return nil
}

// DecideApprove decides a person's approval of the key cur.
func DecideApprove(cur *Record, req ApprovalRequest, np NamespacePolicy, now time.Time) (Step, error) {
	return decideApproval(cur, req, false, np, now)
}

// DecideReject decides a person's rejection of the key cur.
func DecideReject(cur *Record, req ApprovalRequest, np NamespacePolicy, now time.Time) (Step, error) {
	return decideApproval(cur, req, true, np, now)
}

func decideApproval(cur *Record, req ApprovalRequest, reject bool, np NamespacePolicy, now time.Time) (s Step, err error) {
	defer func() { s.Result.Namespace, s.Result.Key = req.Namespace, req.Key }()
	if cur == nil {
		return Step{}, errs.Errorf(errs.NotFound, "no key %q in namespace %q", req.Key, req.Namespace)
	}
	want, outcome, verb, act := HistoryApproved, OutcomeApproved, "approved", "approve"
	if reject {
		want, outcome, verb, act = HistoryApprovalRejected, OutcomeRejected, "rejected", "reject"
	}
	if !(cur.State == StateParked && cur.Reason == ReasonAwaitingApproval) {
		// Decided before: the same decision again (a replayed or late
		// click) answers what was decided and changes nothing.
		ap, approved := lastOf(cur, HistoryApproved)
		rj, rejected := lastOf(cur, HistoryApprovalRejected)
		switch {
		case approved && (!rejected || ap.At.After(rj.At)):
			if !reject {
				return Step{Result: Result{Outcome: OutcomeApproved, Replayed: true, Record: cur}}, nil
			}
			return Step{}, errs.Errorf(errs.Conflict, "key was already approved by %s at %s; nothing changed", ap.By, ap.At.Format(time.RFC3339))
		case rejected:
			if reject {
				return Step{Result: Result{Outcome: OutcomeRejected, Replayed: true, Record: cur}}, nil
			}
			return Step{}, errs.Errorf(errs.Conflict, "key was already rejected by %s at %s; nothing changed", rj.By, rj.At.Format(time.RFC3339))
		}
		return Step{}, errs.Errorf(errs.Conflict, "key is %s and does not await approval; nothing changed", cur.State)
	}
	detail := truncate(req.Note, 200)
	if np.Approval.FourEyes {
		warning, err := fourEyes(RequestedBy(cur), req, np.people, act)
		if err != nil {
			return Step{}, err
		}
		if warning != "" {
			detail = truncate(strings.TrimPrefix(detail+" — "+warning, " — "), 200)
		}
	}
	next := cur.Clone()
	next.ResolvedBy, next.ResolvedAt, next.Note = req.By, timePtr(now), req.Note
	next.UpdatedAt = now
	next.ResumeClaimUntil, next.ResumeSentAt = nil, nil
	if reject {
		next.Reason, next.Message, next.Retryable = ReasonApprovalRejected, truncate(req.Note, MaxMessageLength), false
		next.ExpiresAt = timePtr(now.Add(np.Retention))
	} else {
		next.Reason, next.Message = ReasonApproved, "approved by "+req.By
	}
	next.addHistory(Transition{At: now, Event: want, Attempt: cur.Attempt, By: req.By, Detail: detail})
	ev := Event{At: now, Kind: EventApprovalDecided, Namespace: cur.Namespace, Key: cur.Key, Attempt: cur.Attempt,
		Owner: req.By, Destination: cur.Destination, Reason: next.Reason, Message: verb}
	return Step{Record: next, Events: []Event{ev}, Result: Result{Outcome: outcome, Record: next}}, nil
}

// claimApprovalResume decides a claim of the resume call of a key in the
// approval life cycle: none while it awaits approval; a rejected key's
// execution is resumed whatever its destination's breaker (it writes
// nothing); an approved key goes through the breaker like any parked key.
func claimApprovalResume(cur *Record, claim time.Duration, now time.Time) (s Step, ok, done bool) {
	switch cur.Reason {
	case ReasonAwaitingApproval:
		return Step{}, false, true
	case ReasonApprovalRejected:
		if cur.ResumeSentAt != nil || cur.ResumeClaimUntil != nil && now.Before(*cur.ResumeClaimUntil) {
			return Step{}, false, true
		}
		next := cur.Clone()
		next.ResumeClaimUntil = timePtr(now.Add(claim))
		next.UpdatedAt = now
		return Step{Record: next, Result: Result{Outcome: OutcomeParked, Record: next}}, true, true
	}
	return Step{}, false, false
}

// rejectedResumeAnswered records n8n's answer to the resume call of a
// rejected key: once n8n woke the execution (which then reserves and is
// answered rejected) or no longer holds it, the key is failed for good.
func rejectedResumeAnswered(cur *Record, answer ResumeAnswer, detail string, now time.Time) (Step, bool) {
	next := cur.Clone()
	next.UpdatedAt = now
	switch answer {
	case ResumeAccepted:
		next.addHistory(Transition{At: now, Event: HistoryResumed, Attempt: cur.Attempt, Detail: "to end with the rejection"})
	case ResumeLost:
		next.addHistory(Transition{At: now, Event: HistoryResumeLost, Attempt: cur.Attempt, Detail: truncate(detail, 200)})
	case ResumeRetry:
		if cur.ResumeClaimUntil == nil {
			return Step{}, false
		}
		next.ResumeClaimUntil = nil
		return Step{Record: next, Result: Result{Outcome: OutcomeParked, Record: next}}, true
	default:
		return Step{}, false
	}
	next.State, next.Retryable = StateFailed, false
	next.ParkedAt, next.ParkedSince, next.ResumeURL, next.ResumeSentAt, next.ResumeClaimUntil = nil, nil, "", nil, nil
	return Step{Record: next, Result: Result{Outcome: OutcomeRejected, Record: next}}, true
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ApprovalStore is the part of Store that approving uses; storetest
// checks it on every store.
type ApprovalStore interface {
	// Approve applies DecideApprove; Reject applies DecideReject.
	Approve(ctx context.Context, req ApprovalRequest) (Result, error)
	Reject(ctx context.Context, req ApprovalRequest) (Result, error)
}
