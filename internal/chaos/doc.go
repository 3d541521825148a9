// Package chaos runs the linearizability check of issue 42 against real
// guards: N concurrent clients call real `n8n-guard serve` processes over
// loopback HTTP, every call and its answer is recorded, nemeses kill,
// stop and restart the guards (and PostgreSQL and PgBouncer) at random
// times drawn from one seed, and afterwards every key's history is checked
// against the model in internal/linearize, beside the invariants no model
// states: at most one side effect per key and attempt, and every
// acknowledged reserve, complete and fail still in the store.
//
// The bounded run is part of `go test` (chaos_test.go); the soak command is
// cmd/guard-check (docs/verification.md).
//
// What this package must never do: decide anything the way the guard does
// (it imports no keystore code), or wait for wall time as synchronisation.
// The only sleeps are fault durations and the pauses between faults.
package chaos
