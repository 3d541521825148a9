// Package callback calls one of n8n's webhooks (a parked execution's
// resume URL, a check) within a claim the caller holds: again, with
// exponential backoff, while the answer says so, and never past the
// claim's deadline (after it another guard may claim the key and call).
//
// It never claims and never records: each caller does both with its own
// store primitive (a resume claim and answer, a check claim and answer),
// before and after Call.
package callback

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Retry says how a call is tried again.
type Retry struct {
	// Initial and Max bound the waits between calls, doubled each time.
	Initial, Max time.Duration
	// Tries is how many calls are made at most (0: only Deadline bounds
	// them).
	Tries int
	// Deadline: no wait may end after it.
	Deadline time.Time
	Clock    func() time.Time
	// Sleep waits d or until ctx ends (nil: a timer).
	Sleep func(ctx context.Context, d time.Duration)
	// Waiting, when set, is told before each wait (the call that asks
	// for it is try).
	Waiting func(try int, wait time.Duration)
}

// Stop says why Call returned its last answer.
type Stop int

const (
	// Answered: the answer is final (call said not to try again).
	Answered Stop = iota
	// Stopped: ctx ended, during a call or a wait.
	Stopped
	// TriesOut: Tries calls were made.
	TriesOut
	// PastDeadline: the next wait would end after Deadline.
	PastDeadline
)

// Call calls call until its answer is final (again false), ctx ends, the
// tries run out or the next wait would pass the deadline, and returns the
// last answer and why it stopped. After a wait that ctx ended it does not
// call again: the last answer is the one before the wait.
func Call[T any](ctx context.Context, r Retry, call func(ctx context.Context) (answer T, again bool)) (T, Stop) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = r.Initial, r.Max
	sleep := r.Sleep
	if sleep == nil {
		sleep = timer
	}
	for try := 1; ; try++ {
		out, again := call(ctx)
		switch {
		case ctx.Err() != nil:
			return out, Stopped
		case !again:
			return out, Answered
		case r.Tries > 0 && try >= r.Tries:
			return out, TriesOut
		}
		wait := b.NextBackOff()
		if r.Clock().Add(wait).After(r.Deadline) {
			return out, PastDeadline
		}
		if r.Waiting != nil {
			r.Waiting(try, wait)
		}
		if sleep(ctx, wait); ctx.Err() != nil {
			return out, Stopped
		}
	}
}

func timer(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
