package calls_test

import (
	"context"
	"slices"
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

// Begin runs on the loop's goroutine, in the look's order, once its call
// has a slot: a call whose Begin says not to run does not start and the
// next one may; one that says no more drops the look's later calls. Ended
// runs on the loop's goroutine with what the call's Run left (the race
// detector sees no shared write), and a call's end wakes the loop with
// LookAtEnds although nothing else does.
func TestBeginEndedAndLookAtEnds(t *testing.T) {
	var order []string // Begin's and Ended's, on the loop's goroutine only
	results := map[string]string{}
	release := make(chan struct{})
	call := func(key string, run, more bool) calls.Call {
		var result string // written by Run, read by Ended
		return calls.Call{Key: key,
			Begin: func(context.Context) (bool, bool) { order = append(order, "begin "+key); return run, more },
			Run: func(context.Context) time.Duration {
				<-release
				result = "ran " + key
				return 0
			},
			Ended: func() { order = append(order, "ended "+key); results[key] = result },
		}
	}
	looks := make(chan int, 4)
	n := 0
	stop := start(t, calls.Loop{Commits: &feed{}, Interval: time.Hour, Slots: 1, LookAtEnds: true}, func(context.Context) ([]calls.Call, time.Duration) {
		n++
		looks <- n
		if n > 1 {
			return nil, 0
		}
		// lost: skipped; first: started, the rest dropped; never: no Begin.
		return []calls.Call{call("lost", false, true), call("first", true, false), call("never", true, true)}, 0
	})
	if got := <-looks; got != 1 {
		t.Fatalf("look %d first", got)
	}
	close(release)
	select {
	case <-looks: // the end of "first" woke it
	case <-time.After(10 * time.Second):
		t.Fatal("a call's end did not wake the loop with LookAtEnds")
	}
	stop()
	want := []string{"begin lost", "begin first", "ended first"}
	if !slices.Equal(order, want) || results["first"] != "ran first" || len(results) != 1 {
		t.Fatalf("order %v (want %v), results %v", order, want, results)
	}
}

// While Held says the work is held, a commit does not wake the loop; a
// call's end does (LookAtEnds), and once the work is no longer held the
// commit held back wakes it, and each new one. The commit waits in the
// feed before the loop's first wait, so a loop that took it would look
// at once; a Wake (received only by a loop in its wait) is the signal
// that the loop waited with the commit before it.
func TestHeldWorkIsNotWokenByCommits(t *testing.T) {
	commits := make(chanFeed, 1)
	commits <- struct{}{}
	wake := make(chan struct{})
	var held atomic.Bool
	held.Store(true)
	var looks atomic.Int32
	end := make(chan struct{})
	start(t, calls.Loop{Commits: commits, Wake: wake, Interval: time.Hour, LookAtEnds: true, Held: held.Load}, func(context.Context) ([]calls.Call, time.Duration) {
		if looks.Add(1) > 1 {
			return nil, 0
		}
		return []calls.Call{{Key: "probe", Run: func(context.Context) time.Duration { <-end; return 0 }}}, 0
	})
	var ended sync.Once
	probeEnds := func() { ended.Do(func() { close(end) }) }
	t.Cleanup(probeEnds) // before the loop's stop: a failed test ends its call
	wake <- struct{}{}   // taken in the loop's wait after the first look
	testwait.For(t, "the look of the wake", func() bool { return looks.Load() == 2 })
	if n := len(commits); n != 1 {
		t.Fatalf("the commit was taken by a loop whose work is held (%d looks)", looks.Load())
	}
	held.Store(false)
	probeEnds()
	testwait.For(t, "the looks of the call's end and of the commit held back", func() bool { return looks.Load() == 4 })
	commits <- struct{}{}
	testwait.For(t, "the look of a new commit", func() bool { return looks.Load() == 5 })
}

// chanFeed is a feed whose commits the test sends itself, one pending at
// most, with no cooldown.
type chanFeed chan struct{}

func (f chanFeed) Commits() (<-chan struct{}, func()) { return f, func() {} }

// Unbounded slots start every call found without waiting for one to end.
func TestUnboundedSlots(t *testing.T) {
	release := make(chan struct{})
	var running atomic.Int32
	stop := start(t, calls.Loop{Interval: time.Hour, Slots: calls.Unbounded}, func(context.Context) ([]calls.Call, time.Duration) {
		var out []calls.Call
		for _, k := range []string{"a", "b", "c"} {
			out = append(out, calls.Call{Key: k, Run: func(context.Context) time.Duration { running.Add(1); <-release; return 0 }})
		}
		return out, 0
	})
	testwait.For(t, "the three calls running at once", func() bool { return running.Load() == 3 })
	close(release)
	stop()
}

// A look that ends the loop's context (its work is done) ends the loop
// without a wait: on a controlled clock a wait moves the clock, so the
// worker's clock would pass an interval it never waited.
func TestALookThatEndsTheLoopMakesNoWait(t *testing.T) {
	ctx, done := context.WithCancel(context.Background())
	var slept atomic.Int32
	calls.Loop{Interval: time.Hour, Sleep: func(context.Context, time.Duration) { slept.Add(1) }}.Run(ctx,
		func(context.Context) ([]calls.Call, time.Duration) { done(); return nil, 0 })
	if n := slept.Load(); n != 0 {
		t.Fatalf("the loop waited %d times after its look ended it", n)
	}
}

// Wait returns when its wake is ready, before the sleep ends, and ends
// that sleep.
func TestAWakeEndsAWait(t *testing.T) {
	wake := make(chan struct{})
	close(wake)
	sleepEnded := false
	calls.Wait(context.Background(), func(ctx context.Context, _ time.Duration) { <-ctx.Done(); sleepEnded = true }, time.Hour, wake)
	if !sleepEnded {
		t.Fatal("Wait returned while its sleep still ran")
	}
}
