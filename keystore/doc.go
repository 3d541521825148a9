// Package keystore owns the idempotency domain of n8n-guard: keys, their
// states and the transitions between them, leases and fencing tokens,
// payload fingerprints, retention, and the destination circuit breakers.
//
// The state machine is pure (machine.go, breaker.go): it takes the current
// record and an event and returns the next record and the outcome (a Step).
// Stores are packages of their own (keystore/bolt, keystore/postgres); they
// only load, lock and save around the Decide functions, and never decide:
// each operation (normalise the request, find the namespace's policy, name
// the breaker, call its Decide function) is written once, in ops.go, over
// the two primitives of a store's Driver, and a store embeds Operations.
// This package imports no database driver. A store must make every
// decision atomic with the write it causes: of any number of simultaneous
// reserves of one key, exactly one may be accepted.
//
// What this package must never do: store a payload (only its hash), answer
// `accepted` before the reservation is durable, or retry an `unknown` key on
// its own.
package keystore
