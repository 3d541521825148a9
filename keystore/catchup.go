package keystore

import (
	"fmt"
	"time"
)

// The pace of a catch-up: after an outage the parked executions of a
// destination are resumed oldest first, at most CatchUpRate a second and
// with at most CatchUpConcurrency of them resumed but not yet finished, so
// a recovering destination never gets a burst.

// Defaults of the catch-up (destinations.<name>.catch_up_rate,
// catch_up_concurrency).
const (
	DefaultCatchUpRate        = 5.0 // resumes per second
	DefaultCatchUpConcurrency = 4   // resumed executions in flight
)

// DecideCatchUpStart decides whether the next resume of a destination may
// start at now, given when the previous one started (zero: none yet) and
// how many resumed executions are still in flight. When it may not, wait
// is how long until it may (0: until one in flight finishes).
func DecideCatchUpStart(now, last time.Time, inFlight int, dp DestinationPolicy) (ok bool, wait time.Duration) {
	if inFlight >= dp.CatchUpConcurrency {
		return false, 0
	}
	if last.IsZero() || dp.CatchUpRate <= 0 {
		return true, 0
	}
	gap := time.Duration(float64(time.Second) / dp.CatchUpRate)
	if next := last.Add(gap); now.Before(next) {
		return false, next.Sub(now)
	}
	return true, 0
}

// Pace is a destination's catch-up pace as every guard sharing the store
// sees it: when the last resume call took its turn and until when each
// turn still in flight holds its slot. On PostgreSQL it is a row every
// replica updates, so catch_up_rate and catch_up_concurrency hold for the
// destination whatever the number of guards.
type Pace struct {
	Last time.Time // zero: no resume call yet
	// Slots: until when each slot is held (zero or past: free). At most
	// catch_up_concurrency are kept.
	Slots []time.Time
}

// Turn is one resume call's place in its destination's pace: the slot it
// holds until it is released or Until passes (a guard that died while
// holding it frees it then).
type Turn struct {
	Destination string
	At          time.Time // when the turn was taken
	Slot        int
	Until       time.Time
}

// DecideResumeTurn decides whether a resume call of dp's destination may
// go at now: the pace allows it (DecideCatchUpStart, with the slots held
// as the calls in flight) and a slot is free. ok: the turn, holding its
// slot for hold, and the pace to store. Not ok: wait is how long until
// the pace allows one (0: until a slot is released, which another guard
// may do: look again after a short while).
func DecideResumeTurn(p Pace, dest string, dp DestinationPolicy, hold time.Duration, now time.Time) (next Pace, t Turn, ok bool, wait time.Duration) {
	free, held := -1, 0
	for i := 0; i < dp.CatchUpConcurrency; i++ {
		if i < len(p.Slots) && p.Slots[i].After(now) {
			held++
		} else if free < 0 {
			free = i
		}
	}
	if ok, wait := DecideCatchUpStart(now, p.Last, held, dp); !ok {
		return p, Turn{}, false, wait
	}
	next = Pace{Last: now, Slots: make([]time.Time, dp.CatchUpConcurrency)}
	copy(next.Slots, p.Slots)
	next.Slots[free] = now.Add(hold)
	return next, Turn{Destination: dest, At: now, Slot: free, Until: next.Slots[free]}, true, 0
}

// ReleaseTurn frees t's slot in p; ok is false (p unchanged) when the
// slot lapsed and was taken by another turn meanwhile, or is free.
func ReleaseTurn(p Pace, t Turn) (next Pace, ok bool) {
	if t.Slot < 0 || t.Slot >= len(p.Slots) || !p.Slots[t.Slot].Equal(t.Until) {
		return p, false
	}
	next = Pace{Last: p.Last, Slots: append([]time.Time(nil), p.Slots...)}
	next.Slots[t.Slot] = time.Time{}
	return next, true
}

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
