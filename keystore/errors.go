package keystore

import (
	"errors"
	"fmt"
)

// Code is the machine-readable kind of an error. The API maps each code to
// an HTTP status in exactly one place; the codes are the contract's.
type Code string

const (
	EInvalidRequest   Code = "invalid_request"
	EInvalidKey       Code = "invalid_key"
	EUnauthorized     Code = "unauthorized"
	EForbidden        Code = "forbidden" // a valid token without the scope a route or namespace needs
	ENotFound         Code = "not_found"
	EKeyReused        Code = "key_reused"
	EStaleToken       Code = "stale_token"
	EConflict         Code = "conflict"
	EPayloadTooLarge  Code = "payload_too_large"
	ERequestTimeout   Code = "request_timeout" // the request did not arrive within the read timeout
	EOverloaded       Code = "overloaded"      // the connection cap is reached
	ERateLimited      Code = "rate_limited"    // one client over its own share (unauthenticated requests, sign-ins, connections)
	EStoreUnavailable Code = "store_unavailable"
	// EStoreOutcomeUnknown: a commit failed in a way that may have left the
	// change on disk; the caller must look the key up before retrying.
	EStoreOutcomeUnknown Code = "store_outcome_unknown"
	EInternal            Code = "internal"
	EUnsupported         Code = "unsupported" // an operation this server's store does not offer (a backup of PostgreSQL)
)

// FieldError names one input field and the rule it broke.
type FieldError struct {
	Field string `json:"field"`
	Rule  string `json:"rule"`
}

// Error is the one domain error type: a code, a message safe to show to the
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

// ErrorCode returns the code of err, EInternal for anything that is not a
// domain error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the caller-safe message of a domain error; internal
// errors get a generic text so no detail of the server leaks.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
