package keystore

import (
	"encoding/json"
	"time"
)

// State is where a key stands.
type State string

const (
	StateAbsent    State = "absent" // never seen (or purged); not stored
	StateReserved  State = "reserved"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
	StateUnknown   State = "unknown"
	// StateParked: the event waits in n8n (a Wait node) for its
	// destination to be back; the guard resumes it (park.go).
	StateParked State = "parked"
)

// States lists the stored states, for counts and metrics.
var States = []State{StateReserved, StateCompleted, StateFailed, StateUnknown, StateParked}

// Outcome is the answer to one call; decisions are outcomes, not errors.
type Outcome string

const (
	OutcomeAccepted          Outcome = "accepted"
	OutcomeDuplicate         Outcome = "duplicate_event"
	OutcomeInProgress        Outcome = "in_progress"
	OutcomeStateUnknown      Outcome = "state_unknown"
	OutcomeRejected          Outcome = "rejected"
	OutcomeDestinationPaused Outcome = "destination_paused"
	OutcomeCompleted         Outcome = "completed"
	OutcomeDestinationFailed Outcome = "destination_failed"
	OutcomeFailed            Outcome = "failed" // resolve to failed
	OutcomeFound             Outcome = "found"  // lookup of an existing key
	OutcomeAbsent            Outcome = "absent" // lookup of a key never seen
	OutcomeParked            Outcome = "parked" // the event waits in n8n until the guard resumes it (park.go)
)

// Reason says why an attempt failed.
type Reason string

const (
	ReasonDestinationUnreachable Reason = "destination_unreachable"
	ReasonDestinationFailed      Reason = "destination_failed"
	ReasonValidationFailed       Reason = "validation_failed"
	ReasonOutcomeUnknown         Reason = "outcome_unknown"
	ReasonLeaseExpired           Reason = "lease_expired" // set by the store, never sent
	ReasonResumeLost             Reason = "resume_lost"   // n8n no longer holds the parked execution; never sent
)

// Via says which path completed a key.
type Via string

const (
	ViaPrimary  Via = "primary"
	ViaFallback Via = "fallback"
)

// Record is everything kept about one key. Payloads are never kept: only
// their fingerprint, which is not shown.
type Record struct {
	Namespace      string          `json:"namespace"`
	Key            string          `json:"key"`
	State          State           `json:"state"`
	Attempt        int             `json:"attempt"`
	Owner          string          `json:"owner,omitempty"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	ResultRef      string          `json:"result_ref,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Reason         Reason          `json:"reason,omitempty"`
	Message        string          `json:"message,omitempty"`
	Retryable      bool            `json:"retryable"`
	Via            Via             `json:"via,omitempty"`
	Destination    string          `json:"destination,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	ExpiresAt      *time.Time      `json:"expires_at"`
	ResolvedBy     string          `json:"resolved_by,omitempty"`
	ResolvedAt     *time.Time      `json:"resolved_at"`
	Note           string          `json:"note,omitempty"`
	History        []Transition    `json:"history"`
	// Stage is where the key stands within its state (stage.go): StageOf
	// its fields, set by the store as it writes the record; "" when
	// nothing applies.
	Stage Stage `json:"stage,omitempty"`

	// Summary is the one line a reserve said the event is
	// (ReserveRequest.Summary), for the person who approves or acts on the
	// key. See takeSummary for which reserve sets it.
	Summary string `json:"summary,omitempty"`

	// A parked key (park.go): since when it waits, where the guard calls
	// to resume it, and when that call was answered. Never the payload.
	ParkedAt *time.Time `json:"parked_at,omitempty"`
	// ParkedSince is when the event first parked, when that was before
	// ParkedAt: its woken execution met the destination paused again and
	// parked anew (nil: it has waited since ParkedAt). ParkedAt names the
	// parking (a late answer about an earlier one changes nothing);
	// ParkedSince says how long the event has waited, for parked_limit and
	// for people (WaitingSince).
	ParkedSince  *time.Time `json:"parked_since,omitempty"`
	ResumeURL    string     `json:"resume_url,omitempty"`
	ResumeSentAt *time.Time `json:"resume_sent_at,omitempty"`
	// ResumeClaimUntil: one guard is calling the resume URL until then.
	ResumeClaimUntil *time.Time `json:"-"`
	// Check: an unknown key whose page waits for its check (check.go).
	Check *CheckHold `json:"-"`

	// Fingerprint of the payload of the first attempt that sent one.
	Fingerprint Fingerprint `json:"-"`
	// TokenHash identifies the token of the current attempt; the token itself
	// is handed out once and not kept.
	TokenHash []byte `json:"-"`
	// TokenSeal is set when the attempt's reserve carried a request_id: the
	// token's random part sealed with that request_id (sealToken), so that
	// only a repeat of the same request recovers it.
	TokenSeal []byte `json:"-"`
}

// Transition is one entry of a record's history.
type Transition struct {
	At      time.Time    `json:"at"`
	Event   HistoryEvent `json:"event"`
	Attempt int          `json:"attempt"`
	By      string       `json:"by,omitempty"`
	Detail  string       `json:"detail,omitempty"`
}

// MaxHistory bounds the history kept per record.
const MaxHistory = 20

// HistoryEvent is what one entry of a record's history says happened. It
// is not an EventKind: those are the events of the feed (event.go) that
// other packages act on.
type HistoryEvent string

// History events.
const (
	HistoryReserved     HistoryEvent = "reserved"
	HistoryCompleted    HistoryEvent = "completed"
	HistoryFailed       HistoryEvent = "failed"
	HistoryUnknown      HistoryEvent = "unknown"
	HistoryLeaseExpired HistoryEvent = "lease_expired"
	HistoryResolved     HistoryEvent = "resolved"
	HistoryParked       HistoryEvent = "parked"
	HistoryResumed      HistoryEvent = "resumed" // the guard's resume call was accepted by n8n
	HistoryResumeLost   HistoryEvent = "resume_lost"
	HistoryChecked      HistoryEvent = "checked"      // a check decided (check.go)
	HistoryCheckFailed  HistoryEvent = "check_failed" // a check gave no usable answer: the person is paged
)

// LastBy is who wrote the newest history entry of kind ev ("": none).
func (r *Record) LastBy(ev HistoryEvent) string {
	t, _ := lastOf(r, ev)
	return t.By
}

// lastIndexOf is the index of the newest history entry of kind ev (-1:
// none, or r is nil).
func (r *Record) lastIndexOf(ev HistoryEvent) int {
	if r == nil {
		return -1
	}
	for i := len(r.History) - 1; i >= 0; i-- {
		if r.History[i].Event == ev {
			return i
		}
	}
	return -1
}

func (r *Record) addHistory(t Transition) {
	r.History = append(r.History, t)
	n := len(r.History)
	if n <= MaxHistory {
		return
	}
	// The newest re-run gate and grant stay when older entries go: the
	// gate names the execution to re-run and the grant who allowed it,
	// however often n8n was asked since.
	gate, grant := r.lastIndexOf(HistoryRerunGate), r.lastIndexOf(HistoryRerunGranted)
	overdue := r.lastIndexOf(HistoryParkedOverdue)
	room := MaxHistory
	for _, i := range []int{gate, grant, overdue} {
		if i >= 0 {
			room--
		}
	}
	kept := make([]Transition, MaxHistory)
	k := MaxHistory
	for i := n - 1; i >= 0 && k > 0; i-- {
		pinned := i == gate || i == grant || i == overdue
		if !pinned && room == 0 {
			continue
		}
		if !pinned {
			room--
		}
		k--
		kept[k] = r.History[i]
	}
	r.History = kept[k:]
}

// Finished reports whether the record is in a state retention applies to.
func (r *Record) Finished() bool {
	return r.State == StateCompleted || r.State == StateFailed
}

// Clone returns a deep copy, so a decision never mutates its input.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	c := *r
	c.History = append([]Transition(nil), r.History...)
	c.Result = append(json.RawMessage(nil), r.Result...)
	c.Fingerprint = append(Fingerprint(nil), r.Fingerprint...)
	c.TokenHash = append([]byte(nil), r.TokenHash...)
	c.TokenSeal = append([]byte(nil), r.TokenSeal...)
	c.LeaseExpiresAt = copyTime(r.LeaseExpiresAt)
	c.ExpiresAt = copyTime(r.ExpiresAt)
	c.ResolvedAt = copyTime(r.ResolvedAt)
	c.ParkedAt, c.ResumeSentAt, c.ResumeClaimUntil = copyTime(r.ParkedAt), copyTime(r.ResumeSentAt), copyTime(r.ResumeClaimUntil)
	c.ParkedSince = copyTime(r.ParkedSince)
	c.Check = r.Check.Clone()
	return &c
}

func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := *t
	return &v
}

func timePtr(t time.Time) *time.Time { return &t }

// Result is the answer of every call on a key: the outcome and the record,
// which the API writes flat into one object.
type Result struct {
	// Namespace and Key name the key the answer is about, normalized; they
	// are set even when there is no record.
	Namespace string
	Key       string
	Outcome   Outcome
	Proceed   bool
	// Token is set only when Outcome is accepted.
	Token string
	// RetryAfter is set for in_progress and destination_paused.
	RetryAfter time.Duration
	// PausedFor, with destination_paused: PausedNamespace when the pause
	// is the namespace's own (its failures alone, breaker_view.go) and
	// other namespaces still write; empty when the destination is paused
	// for every namespace.
	PausedFor string
	// Replayed is true when a stored result was returned (duplicate_event,
	// or a repeated reserve, complete, fail or resolve).
	Replayed bool
	// Record is nil only for an absent key.
	Record *Record
}

// WaitingSince is when a parked key's event began to wait: the first of
// its parkings in a row (ParkedSince), else ParkedAt; nil when not parked.
func (r *Record) WaitingSince() *time.Time {
	if r == nil || r.ParkedAt == nil {
		return nil
	}
	if r.ParkedSince != nil && r.ParkedSince.Before(*r.ParkedAt) {
		return r.ParkedSince
	}
	return r.ParkedAt
}
