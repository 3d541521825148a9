// Package linearize checks histories of key operations against a model of
// one key, as a client of the HTTP API sees it, with Porcupine
// (github.com/anishathalye/porcupine).
//
// The model (model.go) is the contract's state machine written a second
// time, independently of keystore/machine.go: reserve (copies, and repeats
// with the same request_id), complete and fail with the token of an
// attempt, resolve by a person, and lookup. What depends on the clock is
// nondeterministic: a lease may have run out at any operation whose
// interval reaches past the earliest moment it could expire, and may still
// be live at any operation that started before the latest one; in a
// namespace whose leases expire to unknown the sweeper may have moved the
// key at any moment after that. A token is fenced by its attempt number.
//
// An operation whose answer never came, or came as a server fault, is
// recorded with Return = Open and an Unknown output: it may have taken
// effect at any moment after its call, or never (Porcupine's convention).
//
// Histories are checked key by key (Check), so a failure names one key and
// Porcupine's visualisation of it can be kept.
//
// What this package must never do: import the guard's own state machine.
// A model that reuses the code it checks proves nothing.
package linearize
