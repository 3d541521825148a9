package notify

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Outbox is the durable store of notifications (notify/bolt keeps it in
// the keystore's bbolt file, notify/postgres in PostgreSQL, shared by
// replicas; notify/outboxtest is the conformance suite both pass). Every
// method is one short transaction: callers never hold one across a Slack
// call. A Record handed to fn is the stored one, under its lock.
type Outbox interface {
	// Add stores the additions in one transaction, and the keystore event
	// cursor with them when cursor is not nil, so an event is turned into
	// a notification exactly once. An addition whose group is open joins
	// it (see Join) instead of creating a notification; one whose once-key
	// was seen before is skipped.
	Add(ctx context.Context, adds []Addition, cursor *uint64) ([]Added, error)
	// EventCursor is the Seq of the last keystore event consumed.
	EventCursor(ctx context.Context) (uint64, error)
	// Due returns up to limit notifications whose next Slack call is due at
	// now, earliest first.
	Due(ctx context.Context, now time.Time, limit int) ([]*Record, error)
	// Update loads the notification, applies fn and saves it (fn sees the
	// current count, which intake may have raised meanwhile). It returns
	// nil, nil when there is no such notification.
	Update(ctx context.Context, id string, fn func(r *Record)) (*Record, error)
	// Get returns the notification, nil when there is none.
	Get(ctx context.Context, id string) (*Record, error)
	// Escalate hands each notification whose escalation is due at now (up
	// to limit) to fn under its lock and saves it together with the
	// escalation fn returns (nil: none), in one transaction: with several
	// guards on one database each step is taken exactly once.
	Escalate(ctx context.Context, now time.Time, limit int, fn func(r *Record) *Record) (int, error)
	// Escalating returns up to limit notifications whose escalation is due
	// at now, without locking them (a look before Escalate).
	Escalating(ctx context.Context, now time.Time, limit int) ([]*Record, error)
	// Settle marks the member m (namespace, key, attempt) of a group
	// decided and applies fn to the group's head under its lock, in one
	// transaction: each key settles once. It returns nil, nil when m is
	// no open member of any group.
	Settle(ctx context.Context, m Member, fn func(head *Record)) (*Record, error)
	// Members pages through the keys of the group whose head is head, in
	// (namespace, key, attempt) order, after the member after (nil: from
	// the first).
	Members(ctx context.Context, head string, after *Member, limit int) ([]Member, error)
	// AboutKey returns the notifications (not escalations) about a key,
	// newest first, at most limit.
	AboutKey(ctx context.Context, namespace, key string, limit int) ([]*Record, error)
	// AboutDestination returns the outage messages (breaker_opened) of a
	// destination, newest first, at most limit: Record.Subject indexes
	// them beside the keys, under namespace "".
	AboutDestination(ctx context.Context, destination string, limit int) ([]*Record, error)
	List(ctx context.Context, q ListQuery) (Page, error)
	// Waiting counts notifications with a Slack call due (now or later).
	Waiting(ctx context.Context) (int, error)
	// Purge deletes delivered and dead notifications created before
	// cutoff, closed groups, old once-keys and expired replay marks; at
	// most limit notifications per call.
	Purge(ctx context.Context, cutoff, now time.Time, limit int) (int, error)
	// SlackUser / SetSlackUser cache users.lookupByEmail answers.
	SlackUser(ctx context.Context, email string) (string, bool, error)
	SetSlackUser(ctx context.Context, email, userID string) error
	// FirstUse records mark (a request's identity) until expires and
	// reports whether it was new: false means it was used before and has
	// not expired. Replicas sharing a database share the marks.
	FirstUse(ctx context.Context, mark string, now, expires time.Time) (bool, error)
}

// Addition is one notification to add.
type Addition struct {
	Record *Record       // the new notification, ID and times set
	Window time.Duration // group window; 0: never joins a group
	Once   string        // when not empty: add only if never added before
	// Member: the key the addition is about, kept as a member of the
	// group it opens or joins (group.go).
	Member *Member
}

// Added is what became of an Addition.
type Added struct {
	Record  *Record // the stored notification, or the group's head (nil when skipped)
	Joined  bool
	Skipped bool
}

// Unavailable is how an outbox reports a storage failure: the cause stays
// in the error text for the log, while callers (and the API) see
// store_unavailable. A domain error passes through unchanged.
func Unavailable(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*errs.Error); ok {
		return err
	}
	return &outboxError{op: op, err: err}
}

type outboxError struct {
	op  string
	err error
}

func (w *outboxError) Error() string { return "notify outbox: " + w.op + ": " + w.err.Error() }
func (w *outboxError) Unwrap() error {
	return &errs.Error{Code: errs.StoreUnavailable, Message: "the outbox is not available"}
}
