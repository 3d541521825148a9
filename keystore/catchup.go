package keystore

import (
	"fmt"
	"time"
)

// The pace of a catch-up: after an outage the parked executions of a
// destination are resumed oldest first, at most CatchUpRate a second and
// with at most CatchUpConcurrency of them resumed but not yet finished, so
// a recovering destination never gets a burst: each call takes its turn
// in the store (pace.go).

// Defaults of the catch-up (destinations.<name>.catch_up_rate,
// catch_up_concurrency).
const (
	DefaultCatchUpRate        = 5.0 // resumes per second
	DefaultCatchUpConcurrency = 4   // resumed executions in flight
)

// CatchUpTook is how long a destination's catch-up took: from its
// breaker's close (the destination back; closedAt) to caughtUpAt, when
// nothing of the outage was left to resume. The one measure of the
// caught-up log line, its metric and the outage's Slack message; zero
// when the close is unknown or later.
func CatchUpTook(closedAt, caughtUpAt time.Time) time.Duration {
	if closedAt.IsZero() || caughtUpAt.Before(closedAt) {
		return 0
	}
	return caughtUpAt.Sub(closedAt)
}

// CaughtUp is the closing line of a destination's catch-up, the same in
// the log and in the outage's Slack message: how many parked events were
// resumed, how many n8n no longer held (each owner is told), how long it
// took. It never says "every event" when some were lost.
func CaughtUp(resumed, lost int, took time.Duration) string {
	s := fmt.Sprintf("caught up: %d resumed, %d lost", resumed, lost)
	if lost > 0 {
		s += " (owner told)"
	}
	secs := int((took + time.Second - 1) / time.Second)
	if secs < 120 {
		return fmt.Sprintf("%s, took %d s", s, secs)
	}
	return fmt.Sprintf("%s, took %d min %d s", s, secs/60, secs%60)
}
