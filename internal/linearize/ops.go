package linearize

import "math"

// Open is the Return of an operation whose answer never came: it may take
// effect at any moment after its call.
const Open int64 = math.MaxInt64

// Kind is one operation of the API on a key.
type Kind string

// The operations the model knows.
const (
	Reserve  Kind = "reserve"
	Complete Kind = "complete"
	Fail     Kind = "fail"
	Resolve  Kind = "resolve"
	Lookup   Kind = "lookup"
)

// Input is one call. Call and Return repeat the operation's interval
// (monotonic nanoseconds on the server's clock), since the model needs
// them to tell whether a lease could have run out; Return is Open for an
// operation that was never answered.
type Input struct {
	Kind    Kind
	Key     string
	Reclaim bool  // the namespace reclaims expired leases (else: unknown)
	Lease   int64 // reserve: lease in nanoseconds
	ReqID   string
	Attempt int    // complete, fail: the attempt of the token sent
	Reason  string // fail: destination_failed, destination_unreachable, validation_failed, outcome_unknown
	// Resolution is resolve's "completed" or "failed".
	Resolution string
	Call       int64
	Return     int64
}

// Output is the answer. Outcome is the answer's outcome, or the problem
// code of a 4xx the protocol defines (stale_token, conflict, not_found).
// Unknown says no answer came, or a server fault (5xx, a transport error):
// the call may or may not have taken effect.
type Output struct {
	Unknown bool
	Outcome string
	State   string // the record's state in the answer ("absent" when none)
	Attempt int    // the record's attempt in the answer (0 when none)
	Repeat  bool   // reserve: the repeat of a live attempt's reserve
}

// Outcomes and problem codes the model produces.
const (
	OutAccepted      = "accepted"
	OutDuplicate     = "duplicate_event"
	OutInProgress    = "in_progress"
	OutStateUnknown  = "state_unknown"
	OutRejected      = "rejected"
	OutCompleted     = "completed"
	OutFailed        = "failed"
	OutDestFailed    = "destination_failed"
	OutStale         = "stale_token"
	OutConflict      = "conflict"
	OutNotFound      = "not_found"
	OutRecord        = "record" // lookup
	reasonLeaseGone  = "lease_expired"
	reasonValidation = "validation_failed"
	reasonUnknown    = "outcome_unknown"
)

// States of a key.
const (
	StAbsent    = "absent"
	StReserved  = "reserved"
	StCompleted = "completed"
	StFailed    = "failed"
	StUnknown   = "unknown"
)
