package keystore

import "time"

// EventKind names something a person should hear about. Events are written
// in the same transaction as the transition that causes them, so a crash
// can lose neither; notify/ reads them with a durable cursor.
type EventKind string

const (
	EventKeyUnknown    EventKind = "key_unknown"
	EventBreakerOpened EventKind = "breaker_opened"
	EventBreakerClosed EventKind = "breaker_closed"
	// EventBreakerNarrowed: a breaker one namespace's failures opened for
	// all (it was the destination's only known user) is open for that
	// namespace alone, since another namespace reserved through the
	// destination. Not breaker_closed: the destination is not back for
	// the namespace whose writes failed, and its outage message stays
	// open. No notification; the event log and the audit show it.
	EventBreakerNarrowed EventKind = "breaker_narrowed"
	// EventKeyResolved: a person decided a key (API, console, CLI, Slack),
	// written with the resolution, so notify updates the messages about it
	// at once. Owner is who resolved it and Message the resolution
	// ("completed" or "failed"): the stores keep the event's fields as
	// they are.
	EventKeyResolved EventKind = "key_resolved"
	// EventRerunRefused: n8n (or the guard's own checks) refused the
	// re-run a person allowed, so the one who clicked hears it. Owner is
	// that person (the grant's By), Message the refusal, Destination the
	// key's.
	EventRerunRefused EventKind = "rerun_refused"
)

// Event is one entry of the store's event log.
type Event struct {
	Seq         uint64    `json:"seq"`
	At          time.Time `json:"at"`
	Kind        EventKind `json:"kind"`
	Namespace   string    `json:"namespace,omitempty"`
	Key         string    `json:"key,omitempty"`
	Attempt     int       `json:"attempt,omitempty"`
	Owner       string    `json:"owner,omitempty"` // holder of the lease, for key events
	Destination string    `json:"destination,omitempty"`
	Reason      Reason    `json:"reason,omitempty"`
	Message     string    `json:"message,omitempty"`
	// Bulk names the bulk action a key_resolved event is part of
	// (BulkResolveRequest.ID): the audit shows one entry per bulk.
	Bulk string `json:"bulk,omitempty"`
	// For breaker events.
	ReopensAt      *time.Time `json:"reopens_at,omitempty"`
	PausedReserves int        `json:"paused_reserves,omitempty"`
	// Summary, for approval_requested: what the reserve said the event is
	// (ReserveRequest.Summary), for the approvers' message.
	Summary string `json:"summary,omitempty"`
	// For caught_up (caughtup.go): what the catch-up resumed, what n8n
	// no longer held, and how long it took from the breaker's close.
	Resumed int           `json:"resumed,omitempty"`
	Lost    int           `json:"lost,omitempty"`
	Took    time.Duration `json:"took,omitempty"`
}

// EventRetention is how long the event log keeps entries.
const EventRetention = 7 * 24 * time.Hour

// MaxEvents is the most events one Events call returns.
const MaxEvents = 1000

// EventLimit is Events' limit: MaxEvents when outside 1..MaxEvents.
func EventLimit(limit int) int {
	if limit <= 0 || limit > MaxEvents {
		return MaxEvents
	}
	return limit
}
