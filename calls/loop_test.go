package calls_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// feed is a store's commit signal.
type feed struct{ keystore.CommitSignal }

func (f *feed) Commits() (<-chan struct{}, func()) { return f.Subscribe() }

// start runs l with look until the test ends; stop ends it and waits.
func start(t *testing.T, l calls.Loop, look calls.Look) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx, look) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// A commit of the store wakes the loop at once, although its interval is
// an hour: the ticker is only the fallback for other guards' commits.
func TestACommitWakesTheLoop(t *testing.T) {
	f := &feed{}
	var looks atomic.Int32
	start(t, calls.Loop{Commits: f, Interval: time.Hour}, func(context.Context) ([]calls.Call, time.Duration) {
		looks.Add(1)
		return nil, 0
	})
	testwait.For(t, "the first look", func() bool { return looks.Load() == 1 })
	f.Notify()
	testwait.For(t, "the look of the commit", func() bool { return looks.Load() == 2 })
}

// The calls found run at most Slots at once; one waiting for a slot
// starts when a call ends, without another look; a key whose call is in
// flight is not started again; Run returns once every call ended.
func TestSlotsAndPendingKeys(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	started := map[string]int{}
	inFlight, maxIn := 0, 0
	call := func(key string) calls.Call {
		return calls.Call{Key: key, Run: func(context.Context) time.Duration {
			mu.Lock()
			started[key]++
			inFlight++
			maxIn = max(maxIn, inFlight)
			mu.Unlock()
			<-release
			mu.Lock()
			inFlight--
			mu.Unlock()
			return 0
		}}
	}
	var looks atomic.Int32
	f := &feed{}
	stop := start(t, calls.Loop{Commits: f, Interval: time.Hour, Slots: 2}, func(context.Context) ([]calls.Call, time.Duration) {
		if looks.Add(1) > 1 {
			return []calls.Call{call("a"), call("b"), call("c")}, 0 // a and b in flight: not again
		}
		return []calls.Call{call("a"), call("b")}, 0
	})
	var freed sync.Once
	free := func() { freed.Do(func() { close(release) }) }
	t.Cleanup(free) // before the loop's stop: a failed test ends its calls
	startedOf := func(key string) int { mu.Lock(); defer mu.Unlock(); return started[key] }
	testwait.For(t, "a and b to start", func() bool { return startedOf("a") == 1 && startedOf("b") == 1 })
	f.Notify()
	testwait.For(t, "the second look", func() bool { return looks.Load() == 2 })
	if startedOf("c") != 0 {
		t.Fatal("a third call started with two slots")
	}
	release <- struct{}{} // one call ends: c takes its slot
	testwait.For(t, "c to start in the freed slot", func() bool { return startedOf("c") == 1 })
	free()
	stop()
	mu.Lock()
	defer mu.Unlock()
	if maxIn != 2 || inFlight != 0 || started["a"] != 1 || started["b"] != 1 || started["c"] != 1 {
		t.Fatalf("at most %d in flight (want 2), %d left in flight after Run returned, started %v", maxIn, inFlight, started)
	}
}

// A call's again has the loop look that soon after it ended, although
// nothing else wakes it.
func TestACallSaysWhenToLookAgain(t *testing.T) {
	var looks atomic.Int32
	start(t, calls.Loop{Interval: time.Hour}, func(context.Context) ([]calls.Call, time.Duration) {
		if looks.Add(1) > 1 {
			return nil, 0
		}
		return []calls.Call{{Key: "a", Run: func(context.Context) time.Duration { return time.Millisecond }}}, 0
	})
	testwait.For(t, "the look the call asked for", func() bool { return looks.Load() == 2 })
}
