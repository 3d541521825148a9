package keystore

import (
	"context"
	"time"
)

// Store keeps idempotency keys. Every implementation must pass the
// conformance suite in keystore/storetest and implements all of it: the
// parts below are grouped by concern, not optional (nothing asks a store
// at run time which of them it has). Decisions come from the state
// machine in this package; a Store loads, locks and saves around it.
type Store interface {
	ParkStore        // parking, catch-up and maintenance windows (park.go)
	ApprovalStore    // approvals (approval.go)
	CheckStore       // checks before paging (check.go)
	AckStore         // acknowledgements in a key's history (ack.go)
	DecisionRecorder // decisions on failed executions, for the audit (audit.go)
	RerunStore       // what n8n said to a re-run (rerun.go)
	Selector         // selection by Filter (filter.go)
	BulkResolver     // bulk decisions (filter.go)
	CommitFeed       // wakes this process's workers at its commits (commit.go)
	KeyedCommitFeed  // the same, saying which keys committed (commit.go)
	StageReader      // the keys of a stage, from its index (stage.go)

	Reserve(ctx context.Context, req ReserveRequest) (Result, error)
	Complete(ctx context.Context, req CompleteRequest) (Result, error)
	Fail(ctx context.Context, req FailRequest) (Result, error)
	Resolve(ctx context.Context, req ResolveRequest) (Result, error)
	// Lookup answers Outcome found with the record, or absent with none.
	Lookup(ctx context.Context, namespace, key string) (Result, error)
	List(ctx context.Context, q ListQuery) (Page, error)
	// Counts returns the number of keys per namespace and state.
	Counts(ctx context.Context) (map[string]map[State]int, error)
	// Destinations lists the breakers as seen at now.
	Destinations(ctx context.Context) ([]Breaker, error)
	// ResetBreaker closes a destination's breaker by a person's decision
	// (see DecideResetBreaker).
	ResetBreaker(ctx context.Context, destination, by, reason string) (Breaker, error)
	// Activity returns the hourly counts from since's hour on, oldest
	// first; hours with nothing counted are left out.
	Activity(ctx context.Context, since time.Time) ([]HourActivity, error)
	// Events returns up to limit events with Seq > after, oldest first
	// (limit outside 1..MaxEvents: MaxEvents).
	Events(ctx context.Context, after uint64, limit int) ([]Event, error)
	// RecentEvents returns events newest first (EventQuery).
	RecentEvents(ctx context.Context, q EventQuery) ([]Event, error)
	// Sweep moves expired leases to unknown and deletes records and events
	// past their retention, in small transactions.
	Sweep(ctx context.Context) (SweepStats, error)
	Ping(ctx context.Context) error
	Close() error
}

// SweepStats says what one sweep did.
type SweepStats struct {
	Expired       int           // finished records deleted
	LeasesExpired int           // reservations moved to unknown
	Events        int           // old events deleted
	LongestTx     time.Duration // the longest write transaction of the sweep
}

// Clock returns the current time; tests pass a controllable one.
type Clock func() time.Time

// Ceil returns d in whole seconds, rounded up, at least 1: the contract's
// retry_after_seconds.
func CeilSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}
