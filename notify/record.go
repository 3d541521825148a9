package notify

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Status of a notification in the outbox.
type Status string

const (
	StatusPending   Status = "pending"   // not yet accepted by Slack
	StatusDelivered Status = "delivered" // Slack accepted it (count updates may follow)
	StatusDead      Status = "dead"      // gave up: permanent error, or transient ones for longer than RetryFor
)

// Kind says what a notification is about.
type Kind string

const (
	KindWorkflowFailed Kind = "workflow_failed"
	KindKeyUnknown     Kind = "key_unknown"
	KindBreakerOpened  Kind = "breaker_opened"
	KindBreakerClosed  Kind = "breaker_closed"
	// KindEscalation: a message nobody acknowledged, sent to the next
	// step of its rule.
	KindEscalation Kind = "escalation"
	// KindParkedLost: n8n no longer holds a parked execution (its resume
	// URL answered 404/409); KindParkedOverdue: a key stayed parked longer
	// than its namespace's parked_limit. Both go to the namespace's owner.
	KindParkedLost    Kind = "parked_lost"
	KindParkedOverdue Kind = "parked_overdue"
	// KindRecordDamaged: the stored record of a key failed its checksum;
	// it is skipped everywhere until a person restores or repairs it. It
	// goes to the namespace's owner, once per key.
	KindRecordDamaged Kind = "record_damaged"
	// KindRerunRefused: n8n (or the guard's checks) refused a re-run a
	// person allowed; the key stays failed. It goes to the namespace's
	// owner, naming who allowed it, once per refusal.
	KindRerunRefused Kind = "rerun_refused"
)

// kinds lists every Kind, for the metrics' series that exist from start.
func kinds() []Kind {
	return []Kind{KindWorkflowFailed, KindKeyUnknown, KindBreakerOpened, KindBreakerClosed, KindEscalation,
		KindParkedLost, KindParkedOverdue, KindApproval, KindRerunRefused}
}

// Decisions taken from a message's buttons.
const (
	DecisionCompleted    = "completed"    // it happened: the key is marked completed
	DecisionRetry        = "retry"        // it did not happen: the key may be tried again
	DecisionAcknowledged = "acknowledged" // a person took it on
	DecisionSnoozed      = "snoozed"      // remind again after snoozeFor
	DecisionRetried      = "retried"      // the execution was retried in n8n
)

// Notification is one item of GET /v1/notifications, exactly the
// contract's list item.
type Notification struct {
	ID           string     `json:"id"`
	Status       Status     `json:"status"`
	Kind         Kind       `json:"kind"`
	WorkflowID   string     `json:"workflow_id"`
	WorkflowName string     `json:"workflow_name"`
	Node         string     `json:"node"`
	ExecutionID  string     `json:"execution_id"`
	Group        string     `json:"group"`
	Count        int        `json:"count"`
	Owner        string     `json:"owner"`
	Channel      string     `json:"channel"`
	Attempts     int        `json:"attempts"`
	CreatedAt    time.Time  `json:"created_at"`
	DeliveredAt  *time.Time `json:"delivered_at"`
	LastFailure  string     `json:"last_failure"`
	// Extensions: what a notification that is not about a failed
	// execution is about (omitted when empty): the destination of an
	// outage or a parked key, the namespace and key of a stuck or parked
	// key, an approval.
	Destination string `json:"destination,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Key         string `json:"key,omitempty"`
}

// Accepted is the answer of Intake (the API adds "accepted": true).
type Accepted struct {
	NotificationID string `json:"notification_id"`
	Group          string `json:"group"`
	Owner          string `json:"owner"`
	Status         string `json:"status"` // "queued" or "grouped"
}

// ListQuery selects a page of the outbox, newest first.
type ListQuery struct {
	Status Status // empty: all
	Limit  int    // default 50, at most 500
	Cursor string // next_cursor of the previous page
}

// Page is one page of the outbox.
type Page struct {
	Items      []Notification `json:"items"`
	NextCursor string         `json:"next_cursor"`
}

// Record is a notification as stored: a header every kind has, its
// delivery, decision and escalation state, and the payload of its kind. It
// holds only redacted text. The parts are embedded, so the stored JSON is
// one flat object (as it was before the split: stores written by earlier
// versions read the same).
type Record struct {
	Header
	Delivery
	Decided
	Escalation
	Failure       // KindWorkflowFailed
	KeyPayload    // KindKeyUnknown, KindParkedLost, KindParkedOverdue, KindRecordDamaged, KindApproval, KindRerunRefused (and escalations of them)
	Breaker       // KindBreakerOpened, KindBreakerClosed; the destination of a parked key
	ParkedKey     // KindParkedLost, KindParkedOverdue
	GroupProgress // KindKeyUnknown: how far the group's keys are decided (group.go)
}

// Header is what every notification has.
type Header struct {
	ID       string    `json:"id"`
	Kind     Kind      `json:"kind"`
	Status   Status    `json:"status"`
	Group    string    `json:"group"`
	GroupEnd time.Time `json:"group_end"` // end of the group window
	Count    int       `json:"count"`
	FirstAt  time.Time `json:"first_at"`
	LastAt   time.Time `json:"last_at"`
	// CreatedAt orders IDs; retry_for counts from it.
	CreatedAt time.Time  `json:"created_at"`
	Owner     string     `json:"owner,omitempty"`
	Channel   string     `json:"channel,omitempty"`
	Runbook   string     `json:"runbook,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	// Reason and Message: why (a key's or breaker's reason, an
	// escalation's "why"), and the redacted error text.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// EventSeq is the keystore event it came from (0: none).
	EventSeq uint64 `json:"event_seq,omitempty"`
}

// Delivery is where the notification stands with Slack.
type Delivery struct {
	ShownCount  int        `json:"shown_count,omitempty"` // count Slack shows
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	LastSentAt  time.Time  `json:"last_sent_at,omitempty"`
	// DueAt is when the worker next calls Slack for it; zero: nothing to do.
	DueAt          time.Time `json:"due_at,omitempty"`
	Attempts       int       `json:"attempts"`
	UpdateFailures int       `json:"update_failures,omitempty"`
	LastFailure    string    `json:"last_failure,omitempty"`
	SlackChannel   string    `json:"slack_channel,omitempty"`
	SlackTS        string    `json:"slack_ts,omitempty"`
	// PostUncertain: a post got no answer after it was sent (a timeout);
	// it may have landed, so the channel is searched before posting again.
	PostUncertain bool      `json:"post_uncertain,omitempty"`
	UncertainAt   time.Time `json:"uncertain_at,omitempty"` // when that post was sent
	// ResentAt: an operator queued the dead notification again; retry_for
	// counts from here.
	ResentAt *time.Time `json:"resent_at,omitempty"`
}

// Decided is the decision taken from the buttons or elsewhere (the last
// one is shown).
type Decided struct {
	Decision      string     `json:"decision,omitempty"`
	DecidedBy     string     `json:"decided_by,omitempty"`      // Slack user ID
	DecidedByName string     `json:"decided_by_name,omitempty"` // who decided elsewhere (the key's resolved_by)
	DecidedAt     *time.Time `json:"decided_at,omitempty"`
	SnoozedUntil  *time.Time `json:"snoozed_until,omitempty"`
	RetriedAs     string     `json:"retried_as,omitempty"` // the new execution's id
	// Version counts the changes of what the buttons act on (decisions,
	// snoozes ending); a button carries the version it was rendered at.
	Version int `json:"version,omitempty"`
}

// Escalation: when the next step is due (nil: none), how many steps
// fired, and the escalation messages sent; an escalation names the
// notification it escalates.
type Escalation struct {
	EscalateAt     *time.Time `json:"escalate_at,omitempty"`
	EscalationStep int        `json:"escalation_step,omitempty"`
	Escalations    []string   `json:"escalations,omitempty"`
	EscalationOf   string     `json:"escalation_of,omitempty"`
	EscalatedKind  Kind       `json:"escalated_kind,omitempty"`
}

// Failure is the payload of a failed execution.
type Failure struct {
	WorkflowID   string `json:"workflow_id,omitempty"`
	WorkflowName string `json:"workflow_name,omitempty"`
	Node         string `json:"node,omitempty"`
	NodeType     string `json:"node_type,omitempty"`
	ExecutionID  string `json:"execution_id,omitempty"`
	ExecutionURL string `json:"execution_url,omitempty"`
	Mode         string `json:"mode,omitempty"`
	RetryOf      string `json:"retry_of,omitempty"`
	ErrorName    string `json:"error_name,omitempty"`
	HTTPCode     string `json:"http_code,omitempty"`
	Description  string `json:"description,omitempty"`
	// ExecutionChecked: what n8n said of ExecutionID before the message
	// offered "Retry execution" (execcheck.go): executionOK, or why the
	// button is not offered; "" not asked yet.
	ExecutionChecked string `json:"execution_checked,omitempty"`
}

// KeyPayload is the payload of a stuck key.
type KeyPayload struct {
	Namespace  string `json:"namespace,omitempty"`
	Key        string `json:"key,omitempty"`
	KeyAttempt int    `json:"key_attempt,omitempty"`
	// Holder: the lease's holder; on an escalation, whom it was for first.
	Holder string `json:"holder,omitempty"`
	// Summary, of an approval request: what the event is, as its reserve
	// said (keystore.Event.Summary).
	Summary string `json:"summary,omitempty"`
	// RerunBy, of a refused re-run: the person who allowed it
	// (keystore.Event.Owner).
	RerunBy string `json:"rerun_by,omitempty"`
}

// Breaker is the payload of a breaker alert. One message tells a whole
// outage: it is posted when the breaker opens and edited in place as
// events park, when it closes and when the parked events are caught up
// (transitions in breaker.go).
type Breaker struct {
	Destination    string     `json:"destination,omitempty"`
	ReopensAt      *time.Time `json:"reopens_at,omitempty"`
	PausedReserves int        `json:"paused_reserves,omitempty"`
	// Parked is the most events seen parked for the destination during the
	// outage; ParkedLost how many of them n8n no longer held.
	Parked     int `json:"parked,omitempty"`
	ParkedLost int `json:"parked_lost,omitempty"`
	// ParkedLeft: still parked during the catch-up, as last seen.
	ParkedLeft int `json:"parked_left,omitempty"`
	// ClosedAt: the breaker closed (ResetBy: by a person's reset, so
	// nothing proved the destination is back). CaughtUpAt: no parked event
	// of the outage waits any more.
	ClosedAt *time.Time `json:"closed_at,omitempty"`
	ResetBy  string     `json:"reset_by,omitempty"`
	// ResetReason: why the person reset it (keystore.ResetOf).
	ResetReason string     `json:"reset_reason,omitempty"`
	CaughtUpAt  *time.Time `json:"caught_up_at,omitempty"`
	// SupersededAt: the breaker opened again (or a maintenance window
	// began) before this outage was over; a newer message tells the rest.
	SupersededAt *time.Time `json:"superseded_at,omitempty"`
	// OutageSeq is the last keystore event folded in: a batch read again
	// after a crash changes nothing twice.
	OutageSeq uint64 `json:"outage_seq,omitempty"`
	// CatchUpSeq is the caught_up event folded in (0: none yet): the
	// outage takes one catch-up's report, however many guards write one.
	CatchUpSeq uint64 `json:"catch_up_seq,omitempty"`
}

// ParkedKey is the payload of a parked key a person must look at: the n8n
// execution waiting in its Wait node (its id, and a link to n8n's
// executions when the resume URL told where n8n is) and since when.
type ParkedKey struct {
	ParkedAt         *time.Time `json:"parked_at,omitempty"`
	WaitingExecution string     `json:"waiting_execution,omitempty"`
	ExecutionsURL    string     `json:"executions_url,omitempty"`
}

// Subject is what a notification is indexed under, so later events find
// it: a stuck key by its namespace and key, an outage by its destination
// under namespace "" (no namespace is empty). ok is false for the rest.
func (r *Record) Subject() (namespace, key string, ok bool) {
	switch r.Kind {
	case KindKeyUnknown, KindApproval:
		return r.Namespace, r.Key, true
	case KindBreakerOpened:
		return "", r.Destination, true
	}
	return "", "", false
}

// Acknowledged reports a decision that ends escalation.
func (r *Record) Acknowledged() bool {
	return r.Decision != "" && r.Decision != DecisionSnoozed
}

// clone returns a deep copy (the pointers and the slice are copied).
func (r *Record) clone() *Record {
	c := *r
	c.Escalations = append([]string(nil), r.Escalations...)
	for _, p := range []**time.Time{&c.Deadline, &c.DeliveredAt, &c.ResentAt, &c.DecidedAt, &c.SnoozedUntil, &c.EscalateAt, &c.ReopensAt, &c.ClosedAt, &c.CaughtUpAt, &c.SupersededAt, &c.ParkedAt} {
		if *p != nil {
			t := **p
			*p = &t
		}
	}
	return &c
}

// Item is the record as the API lists it.
func (r *Record) Item() Notification {
	return Notification{
		ID: r.ID, Status: r.Status, Kind: r.Kind,
		WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Node: r.Node, ExecutionID: r.ExecutionID,
		Group: r.Group, Count: r.Count, Owner: r.Owner, Channel: r.Channel,
		Attempts: r.Attempts, CreatedAt: r.CreatedAt, DeliveredAt: r.DeliveredAt, LastFailure: r.LastFailure,
		Destination: r.Destination, Namespace: r.Namespace, Key: r.Key,
	}
}

// newID returns an ID that sorts by creation time.
func newID(now time.Time) string {
	return fmt.Sprintf("n_%016x%08x", uint64(now.UnixNano()), rand.Uint32())
}

// IDPrefix is the prefix of every ID created at t: IDs sort by creation
// time, so a purge stops at IDPrefix(cutoff).
func IDPrefix(t time.Time) string { return fmt.Sprintf("n_%016x", uint64(t.UnixNano())) }

// Join folds one more occurrence into the head of an open group. The count
// reaches Slack by chat.update, at most every half window, so one group
// costs at most three Slack calls: the post, one update inside the window
// and one after it. Outboxes call it under the head's lock.
func Join(head *Record, now time.Time, window time.Duration) {
	head.Count++
	head.LastAt = now
	if head.Status == StatusDelivered && head.DueAt.IsZero() {
		head.DueAt = later(now, head.LastSentAt.Add(window/2))
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
