package notify

import (
	"context"
	"errors"
	"time"
)

// Slack is what notify asks of Slack. The slack package implements it
// over Slack's Web API (slack-go); tests may use another. Errors that are
// answers of Slack (or the lack of one) are *CallError; any other error
// counts as a passing fault.
type Slack interface {
	// Post sends a new message to channel (a channel ID, or a user ID for
	// a direct message) and returns where it landed.
	Post(ctx context.Context, channel string, m Message) (ch, ts string, err error)
	// Update replaces the message at channel/ts.
	Update(ctx context.Context, channel, ts string, m Message) error
	// Find looks for the message of notification id posted to channel
	// since since (an earlier post of it got no answer).
	Find(ctx context.Context, channel, id string, since time.Time) (ts string, found bool, err error)
	// Ephemeral answers user in channel, visible to them alone.
	Ephemeral(ctx context.Context, channel, user, text string) error
	// UserByEmail is the user ID of an e-mail; found is false when Slack
	// knows no such user.
	UserByEmail(ctx context.Context, email string) (id string, found bool, err error)
	// GroupMembers lists the user IDs of a user group.
	GroupMembers(ctx context.Context, group string) ([]string, error)
	// AskReason opens a form (a modal) in answer to the click of
	// triggerID that asks for a reason; its submission comes back as a
	// click ActionRejectReason with meta as its value (notify/decision's
	// ReasonForm).
	AskReason(ctx context.Context, triggerID, meta, title string) error
}

// Message is what a post or update shows: the notification as it stands,
// the owner as Slack mrkdwn (<@U…>, <!subteam^S…>, or plain words), the
// guard's URL for the exact resolve call, and whether "Retry execution"
// is offered.
type Message struct {
	Record   *Record
	Mention  string
	GuardURL string
	CanRetry bool
	// Links: the console pages of the message (consoleLinks; none without
	// a public URL).
	Links []Link
	// Approvers: who may approve an approval request (the namespace's
	// approvers as configured: U… users, S… groups).
	Approvers []string
}

// Class is what a Slack call's result means for the notification.
type Class int

const (
	classOK          Class = iota
	ClassTransient         // Slack answered with a passing fault: back off, count the attempt
	ClassRateLimited       // 429: wait Retry-After, not counted
	ClassPermanent         // Slack refused for good: dead at once
	ClassUnreachable       // never got an answer (DNS, refused, TLS, timeout): trip the breaker
	classCanceled          // our own shutdown
)

var classNames = map[Class]string{
	classOK: "ok", ClassTransient: "transient", ClassRateLimited: "rate_limited",
	ClassPermanent: "permanent", ClassUnreachable: "unreachable", classCanceled: "canceled",
}

func (c Class) String() string { return classNames[c] }

// CallError is a failed Slack call as the adapter understood it.
type CallError struct {
	Class      Class
	RetryAfter time.Duration // rate limited: Slack's Retry-After (0: not said)
	Reason     string        // Slack's error code, or the transport's error text
	Hint       string        // what an operator does about it ("" when nothing specific)
	// MaybeSent: no answer came back after the request may have reached
	// Slack (a timeout, a dropped connection), as opposed to a connection
	// never made.
	MaybeSent bool
	Err       error
}

func (e *CallError) Error() string { return e.Reason }
func (e *CallError) Unwrap() error { return e.Err }

// errPaused: the call was not made, Slack is paused.
var errPaused = errors.New("Slack is paused after it was unreachable")

// classify reads a Slack call's error.
func classify(ctx context.Context, err error) (Class, time.Duration) {
	if err == nil {
		return classOK, 0
	}
	if ctx.Err() != nil {
		return classCanceled, 0
	}
	if errors.Is(err, errPaused) {
		return ClassUnreachable, 0
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Class, ce.RetryAfter
	}
	return ClassTransient, 0
}

// SlackReason is why a Slack call failed, as a log line says it.
func SlackReason(err error) string {
	var ce *CallError
	switch {
	case err == nil:
		return "unknown"
	case errors.As(err, &ce):
		return Truncate(ce.Reason, 300)
	}
	return Truncate(err.Error(), 300)
}

func hint(err error) string {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Hint
	}
	return ""
}

// maybeSent reports an error after which a post may have landed.
func maybeSent(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.MaybeSent
}
