package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed atomic.Bool
	msg    string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed.Store(true)
	f.msg = format
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	f := &fakeT{TB: t}
	For(f, "the third poll", func() bool { return n.Add(1) == 3 })
	if f.failed.Load() || n.Load() != 3 {
		t.Fatalf("For failed (%v) or polled %d times, want 3", f.failed.Load(), n.Load())
	}
}

func TestWithinFailsNamingWhatNeverCame(t *testing.T) {
	f := &fakeT{TB: t}
	start := time.Now()
	Within(f, 30*time.Millisecond, "a condition that never holds", func() bool { return f.failed.Load() })
	if !f.failed.Load() || f.msg != "timed out waiting for %s" {
		t.Fatalf("Within did not fail: %v %q", f.failed.Load(), f.msg)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatalf("Within gave up before its deadline")
	}
}

func TestValueReturnsWhatHeld(t *testing.T) {
	var n atomic.Int32
	f := &fakeT{TB: t}
	got := Value(f, Deadline, "the third poll", func() (int32, bool) { v := n.Add(1); return v, v == 3 })
	if f.failed.Load() || got != 3 {
		t.Fatalf("Value failed (%v) or returned %d, want 3", f.failed.Load(), got)
	}
}

func TestValueFailsNamingTheLastValueSeen(t *testing.T) {
	var n atomic.Int32
	f := &fakeT{TB: t}
	Value(f, 30*time.Millisecond, "a count that never reaches -1", func() (int32, bool) { return n.Add(1), false })
	if !f.failed.Load() || f.msg != "timed out after %s waiting for %s; last seen: %+v" {
		t.Fatalf("Value did not fail naming the last value: %v %q", f.failed.Load(), f.msg)
	}
}

func TestPollSaysWhetherTheConditionHeld(t *testing.T) {
	if !Poll(Deadline, func() bool { return true }) {
		t.Fatal("Poll said a holding condition did not hold")
	}
	if Poll(10*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll said a condition that never holds held")
	}
}

func TestPollEveryAsksAtMostOncePerPause(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	PollEvery(300*time.Millisecond, 100*time.Millisecond, func() bool { n.Add(1); return false })
	// 1+2+4+...+64 ms of short polls, then 100 ms pauses: about 10 asks in
	// 300 ms; a 20 ms cap would ask about 20 times.
	if got := n.Load(); got > 12 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("asked %d times in %s, want at most 12", got, time.Since(start))
	}
}
