package keystore

import (
	"context"
	"time"
)

// The end of a destination's catch-up is an event, so that the log line
// of the guard that caught up and the outage's Slack message say one
// figure: notify folds the event's Took into the message instead of
// measuring its own. Two guards on one PostgreSQL may each write one for
// the same outage; notify folds the first.

// EventCaughtUp: a destination's catch-up resumed every parked event of
// its outage (Resumed, Lost, Took; Message the closing line, CaughtUp).
const EventCaughtUp EventKind = "caught_up"

// DecideCaughtUp is the event of dest's caught-up catch-up at now. It
// changes no breaker and no key.
func DecideCaughtUp(dest string, resumed, lost int, took time.Duration, now time.Time) Step {
	return Step{Events: []Event{{At: now, Kind: EventCaughtUp, Destination: dest,
		Resumed: resumed, Lost: lost, Took: max(took, 0), Message: CaughtUp(resumed, lost, took)}}}
}

// CatchUpRecorder is the part of ParkStore the catch-up runner tells
// the end of a destination's catch-up.
type CatchUpRecorder interface {
	RecordCaughtUp(ctx context.Context, dest string, resumed, lost int, took time.Duration) error
}

// RecordCaughtUp implements CatchUpRecorder: it writes the event of
// dest's caught-up catch-up (DecideCaughtUp) as a decision on no key (the
// driver finds no record under the empty namespace and key, and writes
// the event alone, as RecordDecision does).
func (o *Operations) RecordCaughtUp(ctx context.Context, dest string, resumed, lost int, took time.Duration) error {
	if err := CheckNamespace("destination", dest); err != nil {
		return err
	}
	_, err := o.Driver.DecideKey(ctx, Op{Name: "caught up",
		Decide: func(_ *Record, _ *Breaker, now time.Time) (Step, error) {
			return DecideCaughtUp(dest, resumed, lost, took, now), nil
		}})
	return err
}
