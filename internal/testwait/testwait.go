// Package testwait is how the tests wait for what they promise: poll a
// condition until it holds, and fail naming what never came. A test
// never sleeps a fixed time as synchronisation; the deadline is only
// there so that a condition that never holds fails instead of hanging,
// and it is generous, for a loaded 2-core machine.
//
// Only tests import it.
package testwait

import (
	"testing"
	"time"
)

// Deadline is how long For waits.
const Deadline = 30 * time.Second

// For polls cond until it returns true; after Deadline it fails t with
// "timed out waiting for <what>".
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Deadline, what, cond)
}

// Within is For with its own deadline d.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	WithinEvery(t, d, 20*time.Millisecond, what, cond)
}

// Outside is the pause of a wait on an outside system (n8n, a container,
// a guard process), which a 20 ms poll would load.
const Outside = 250 * time.Millisecond

// WithinEvery is Within asking at most once per every after the first
// short polls.
func WithinEvery(t testing.TB, d, every time.Duration, what string, cond func() bool) {
	t.Helper()
	if !PollEvery(d, every, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Value polls get until it says ok and returns what it got then. After d
// it fails t naming what was awaited and the last value seen, so that a
// wait on a slow outside system (n8n, a container) says where it stopped.
func Value[T any](t testing.TB, d time.Duration, what string, get func() (T, bool)) T {
	t.Helper()
	var last T
	if !Poll(d, func() bool {
		var ok bool
		last, ok = get()
		return ok
	}) {
		t.Fatalf("timed out after %s waiting for %s; last seen: %+v", d, what, last)
	}
	return last
}

// Poll polls cond until it holds or d has passed, and says whether it
// held: for a test that asserts on what it finds either way.
func Poll(d time.Duration, cond func() bool) bool {
	return PollEvery(d, 20*time.Millisecond, cond)
}

// PollEvery is Poll asking at most once per every after the first short
// polls.
func PollEvery(d, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	// Short polls first: most conditions hold within milliseconds; then
	// every, so that a long wait does not spin.
	for pause := time.Millisecond; !cond(); pause = min(2*pause, every) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
	return true
}
