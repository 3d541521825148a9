package notify

import (
	"context"
	"time"
)

// Outbox is the durable store of notifications. The bbolt implementation
// shares the keystore's file; another backend (PostgreSQL) can be added
// behind this interface. Every method is one short transaction: callers
// never hold one across a Slack call.
type Outbox interface {
	// Add stores the additions in one transaction, and the keystore event
	// cursor with them when cursor is not nil, so an event is turned into
	// a notification exactly once. An addition whose group is open joins
	// it (see join) instead of creating a notification; one whose once-key
	// was seen before is skipped.
	Add(ctx context.Context, adds []addition, cursor *uint64) ([]added, error)
	// EventCursor is the Seq of the last keystore event consumed.
	EventCursor(ctx context.Context) (uint64, error)
	// Due returns up to limit notifications whose next Slack call is due at
	// now, earliest first.
	Due(ctx context.Context, now time.Time, limit int) ([]*record, error)
	// Update loads the notification, applies fn and saves it (fn sees the
	// current count, which intake may have raised meanwhile).
	Update(ctx context.Context, id string, fn func(r *record)) (*record, error)
	// Get returns the notification, nil when there is none.
	Get(ctx context.Context, id string) (*record, error)
	// Escalate hands each notification whose escalation is due at now (up
	// to limit) to fn under its lock and saves it together with the
	// escalation fn returns (nil: none), in one transaction: with several
	// guards on one database each step is taken exactly once.
	Escalate(ctx context.Context, now time.Time, limit int, fn func(r *record) *record) (int, error)
	// Escalating returns up to limit notifications whose escalation is due
	// at now, without locking them (a look before Escalate).
	Escalating(ctx context.Context, now time.Time, limit int) ([]*record, error)
	List(ctx context.Context, q ListQuery) (Page, error)
	// Waiting counts notifications with a Slack call due (now or later).
	Waiting(ctx context.Context) (int, error)
	// Purge deletes delivered and dead notifications created before
	// cutoff, closed groups and old once-keys; at most limit per call.
	Purge(ctx context.Context, cutoff, now time.Time, limit int) (int, error)
	// SlackUser / SetSlackUser cache users.lookupByEmail answers.
	SlackUser(ctx context.Context, email string) (string, bool, error)
	SetSlackUser(ctx context.Context, email, userID string) error
}

type addition struct {
	rec    *record       // the new notification, ID and times set
	window time.Duration // group window; 0: never joins a group
	once   string        // when not empty: add only if never added before
}

type added struct {
	rec     *record // the stored notification, or the group's head
	joined  bool
	skipped bool
}
