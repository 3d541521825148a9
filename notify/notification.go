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
)

// Decisions taken from a message's buttons.
const (
	DecisionCompleted    = "completed"    // it happened: the key is marked completed
	DecisionRetry        = "retry"        // it did not happen: the key may be tried again
	DecisionAcknowledged = "acknowledged" // a person took it on
	DecisionSnoozed      = "snoozed"      // remind again after SnoozeFor
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

// record is a notification as stored: the list item plus what is needed to
// render and deliver it. It holds only redacted text.
type record struct {
	ID          string     `json:"id"`
	Kind        Kind       `json:"kind"`
	Status      Status     `json:"status"`
	Group       string     `json:"group"`
	GroupEnd    time.Time  `json:"group_end"` // end of the group window
	Count       int        `json:"count"`
	ShownCount  int        `json:"shown_count,omitempty"` // count Slack shows
	FirstAt     time.Time  `json:"first_at"`
	LastAt      time.Time  `json:"last_at"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	LastSentAt  time.Time  `json:"last_sent_at,omitempty"`
	// DueAt is when the worker next calls Slack for it; zero: nothing to do.
	DueAt          time.Time `json:"due_at,omitempty"`
	Attempts       int       `json:"attempts"`
	UpdateFailures int       `json:"update_failures,omitempty"`
	LastFailure    string    `json:"last_failure,omitempty"`
	SlackChannel   string    `json:"slack_channel,omitempty"`
	SlackTS        string    `json:"slack_ts,omitempty"`

	Owner    string     `json:"owner,omitempty"`
	Channel  string     `json:"channel,omitempty"`
	Runbook  string     `json:"runbook,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`

	// Failed executions.
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
	Message      string `json:"message,omitempty"`
	Description  string `json:"description,omitempty"`

	// Keystore events.
	EventSeq       uint64     `json:"event_seq,omitempty"`
	Namespace      string     `json:"namespace,omitempty"`
	Key            string     `json:"key,omitempty"`
	KeyAttempt     int        `json:"key_attempt,omitempty"`
	Holder         string     `json:"holder,omitempty"`
	Destination    string     `json:"destination,omitempty"`
	Reason         string     `json:"reason,omitempty"`
	ReopensAt      *time.Time `json:"reopens_at,omitempty"`
	PausedReserves int        `json:"paused_reserves,omitempty"`

	// PostUncertain: a post got no answer after it was sent (a timeout);
	// it may have landed, so the channel is searched before posting again.
	PostUncertain bool      `json:"post_uncertain,omitempty"`
	UncertainAt   time.Time `json:"uncertain_at,omitempty"` // when that post was sent

	// Decisions from the buttons (the last one is shown).
	Decision      string     `json:"decision,omitempty"`
	DecidedBy     string     `json:"decided_by,omitempty"`      // Slack user ID
	DecidedByName string     `json:"decided_by_name,omitempty"` // who decided elsewhere (the key's resolved_by)
	DecidedAt     *time.Time `json:"decided_at,omitempty"`
	SnoozedUntil  *time.Time `json:"snoozed_until,omitempty"`
	RetriedAs     string     `json:"retried_as,omitempty"` // the new execution's id

	// canRetry, set before rendering, shows "Retry execution": the guard
	// can reach n8n's API. Not stored.
	canRetry bool

	// Escalation: when the next step is due (nil: none), how many steps
	// fired, and the escalation messages sent; an escalation names the
	// notification it escalates.
	EscalateAt     *time.Time `json:"escalate_at,omitempty"`
	EscalationStep int        `json:"escalation_step,omitempty"`
	Escalations    []string   `json:"escalations,omitempty"`
	EscalationOf   string     `json:"escalation_of,omitempty"`
	EscalatedKind  Kind       `json:"escalated_kind,omitempty"`

	// ResentAt: an operator queued the dead notification again; retry_for
	// counts from here.
	ResentAt *time.Time `json:"resent_at,omitempty"`
}

// acknowledged reports a decision that ends escalation.
func (r *record) acknowledged() bool {
	return r.Decision != "" && r.Decision != DecisionSnoozed
}

func (r *record) item() Notification {
	return Notification{
		ID: r.ID, Status: r.Status, Kind: r.Kind,
		WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName, Node: r.Node, ExecutionID: r.ExecutionID,
		Group: r.Group, Count: r.Count, Owner: r.Owner, Channel: r.Channel,
		Attempts: r.Attempts, CreatedAt: r.CreatedAt, DeliveredAt: r.DeliveredAt, LastFailure: r.LastFailure,
	}
}

// newID returns an ID that sorts by creation time.
func newID(now time.Time) string {
	return fmt.Sprintf("n_%016x%08x", uint64(now.UnixNano()), rand.Uint32())
}

// join folds one more occurrence into the head of an open group. The count
// reaches Slack by chat.update, at most every half window, so one group
// costs at most three Slack calls: the post, one update inside the window
// and one after it.
func join(head *record, now time.Time, window time.Duration) {
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
