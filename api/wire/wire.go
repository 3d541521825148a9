// Package wire holds the bodies of the API's answers that both the server
// (package api) and its Go client (package client) read: the one place
// their JSON shape is written. It must never import an HTTP framework, so
// that a program that only calls the API does not link the server.
package wire

import (
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// BackupPath is the route of a backup. It is an admin route for a token
// without namespace limits: whoever holds its answer holds every key of
// every namespace, every notification and its text.
const BackupPath = "/v1/admin/backup"

// Answer is the flat object every call on a key answers: the outcome and
// the key's record at the top level of one object.
type Answer struct {
	Found   *bool            `json:"found,omitempty"`
	Outcome keystore.Outcome `json:"outcome"`
	Proceed bool             `json:"proceed"`
	Token   string           `json:"token,omitempty"`
	// Repeat marks an accepted answer given again to a repeated reserve
	// (same request_id, lease live): the same token, nothing new recorded.
	Repeat            bool `json:"repeat,omitempty"`
	RetryAfterSeconds int  `json:"retry_after_seconds,omitempty"`
	// ExpectedResumeAt, with outcome parked: when the guard expects to
	// resume the execution (the end of the destination's cooldown).
	ExpectedResumeAt *time.Time `json:"expected_resume_at,omitempty"`
	// AwaitingApproval, with outcome parked: the key waits for a person's
	// approval (keystore/approval.go), not for its destination.
	AwaitingApproval bool `json:"awaiting_approval,omitempty"`
	// PausedFor, with outcome destination_paused: "namespace" when only
	// the caller's namespace is paused (its own writes failed; other
	// namespaces still write through the destination).
	PausedFor string `json:"paused_for,omitempty"`
	*keystore.Record
}
