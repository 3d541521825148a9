// Package errs is the service's one error vocabulary: the error type, its
// machine codes and the fields a caller got wrong. Every package (keystore,
// notify, api, api/console) speaks it; api/problem maps each code to an
// HTTP status in one table.
//
// It is a leaf: it imports nothing of the service and no transport. The
// codes here are the domain's, and Unauthorized, which every adapter that
// checks a caller raises (a token, a session, Slack's signature); codes
// only HTTP can raise (a slow or oversized request, the connection cap)
// live in api/problem.
package errs

import (
	"errors"
	"fmt"
)

// Code is the machine-readable kind of an error; the codes are the
// contract's (docs/api.md names each one).
type Code string

// The domain's codes.
const (
	InvalidRequest Code = "invalid_request"
	InvalidKey     Code = "invalid_key"
	NotFound       Code = "not_found"
	KeyReused      Code = "key_reused"
	StaleToken     Code = "stale_token"
	Conflict       Code = "conflict"
	// Forbidden: who asked may not do this (a token's role or namespaces, a
	// person's rights in the console).
	Forbidden        Code = "forbidden"
	StoreUnavailable Code = "store_unavailable"
	// StoreOutcomeUnknown: a commit failed in a way that may have left the
	// change on disk; the caller must look the key up before retrying.
	StoreOutcomeUnknown Code = "store_outcome_unknown"
	// RecordDamaged: the stored record of a key fails its checksum. The key
	// is not decided on and nothing is written over it until a person
	// restores or repairs it (docs/runbooks.md, "A key answers record_damaged").
	RecordDamaged Code = "record_damaged"
	Internal      Code = "internal"
	Unsupported   Code = "unsupported" // an operation this server's store does not offer (a backup of PostgreSQL)
	// ApprovalRequired: the namespace requires a person's approval before
	// writing, and the reserve gave no resume_url to wait for it with.
	ApprovalRequired Code = "approval_required"
	// RerunNotGranted: a re-run gate's reserve of a failed key that no
	// person allowed a re-run of (keystore/rerun.go); the gate's node
	// fails, and its execution waits there to be re-run.
	RerunNotGranted Code = "rerun_not_granted"
	// ParkedWaiting: a resolution of a parked key whose n8n execution
	// still waits for the guard's resume call (keystore/resolve_parked.go):
	// deciding it would leave that execution in its Wait node for good.
	ParkedWaiting Code = "parked_waiting"
)

// Unauthorized: who asked could not be identified (no valid bearer token,
// console session or Slack signature). It is no domain code: only the
// adapters that check a caller raise it (api, api/openid, slack's
// signature check), and api/problem lists it with the transport's codes
// (problem.Unauthorized is this code). It is here so that an adapter that
// is not HTTP's can raise it without importing api/problem.
const Unauthorized Code = "unauthorized"

// Codes lists every domain code, for the tests that check each has its
// status and documentation.
var Codes = []Code{InvalidRequest, InvalidKey, NotFound, KeyReused, StaleToken, Conflict,
	Forbidden, StoreUnavailable, StoreOutcomeUnknown, RecordDamaged, Internal, Unsupported, ApprovalRequired, RerunNotGranted, ParkedWaiting}

// FieldError names one input field and the rule it broke.
type FieldError struct {
	Field string `json:"field"`
	Rule  string `json:"rule"`
}

// Error is the one error type: a code, a message safe to show to the
// caller, and optionally the fields that were wrong.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the given code.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidField is the invalid_request error about one field.
func InvalidField(field, rule, msg string) error {
	return &Error{Code: InvalidRequest, Message: msg, Fields: []FieldError{{Field: field, Rule: rule}}}
}

// CodeOf returns the code of err, Internal for anything that is not an
// *Error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// MessageOf returns the caller-safe message of err; anything that is not
// an *Error gets a generic text so no detail of the server leaks.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
