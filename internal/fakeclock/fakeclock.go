// Package fakeclock is the clock the tests move by hand: a time that
// changes only when the test says so, safe to read from the goroutines of
// the code under test. Its Now is a keystore.Clock.
//
// Only tests import it.
package fakeclock

import (
	"context"
	"sync"
	"time"
)

// Start is where New's clocks begin unless told otherwise: a fixed,
// millisecond-aligned instant, so that stored times round-trip.
var Start = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Clock is a time that moves only by Advance, Set and Sleep.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock at Start.
func New() *Clock { return At(Start) }

// At returns a clock at t.
func At(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Sleep is a sleep of d on this clock: it moves the clock by d and
// returns at once. It is the Sleep given to code that waits through an
// injected sleep (the catch-up and re-run runners), so that their pace
// is read off the clock and no wall time passes. ctx is not read: the
// caller checks it after its sleep, as it would after a real one.
func (c *Clock) Sleep(_ context.Context, d time.Duration) { c.Advance(d) }
