package callback_test

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/callback"
)

// fakeClock moves only when the caller sleeps, so the waits are exact.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time                           { return c.now }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) { c.now = c.now.Add(d) }

func TestCallStopsAtTheFirstFinalAnswerTheTriesOrTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		finalAt  int // the call whose answer is final (0: none is)
		tries    int
		deadline time.Duration
		want     callback.Stop
		calls    int
	}{
		{name: "final answer at once", finalAt: 1, deadline: time.Minute, want: callback.Answered, calls: 1},
		{name: "final answer after two retries", finalAt: 3, deadline: time.Minute, want: callback.Answered, calls: 3},
		{name: "tries run out", tries: 3, deadline: time.Hour, want: callback.TriesOut, calls: 3},
		{name: "the next wait would pass the deadline", deadline: 40 * time.Millisecond, want: callback.PastDeadline, calls: 1}, // waits are 100 ms ± half
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(0, 0)}
			var waits []time.Duration
			r := callback.Retry{Initial: 100 * time.Millisecond, Max: time.Second, Tries: tc.tries,
				Deadline: clock.now.Add(tc.deadline), Clock: clock.Now, Sleep: clock.Sleep,
				Waiting: func(_ int, d time.Duration) { waits = append(waits, d) }}
			calls := 0
			got, stop := callback.Call(context.Background(), r, func(context.Context) (int, bool) {
				calls++
				return calls, calls != tc.finalAt
			})
			if stop != tc.want || calls != tc.calls || got != calls {
				t.Fatalf("stop %v after %d calls (answer %d), want %v after %d", stop, calls, got, tc.want, tc.calls)
			}
			if len(waits) != calls-1 {
				t.Fatalf("%d waits for %d calls", len(waits), calls)
			}
			if clock.now.After(r.Deadline) {
				t.Fatalf("waited until %s, past the deadline %s", clock.now, r.Deadline)
			}
		})
	}
}

func TestCallMakesNoCallAfterAWaitThatTheContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clock := &fakeClock{now: time.Unix(0, 0)}
	r := callback.Retry{Initial: 100 * time.Millisecond, Max: time.Second, Deadline: clock.now.Add(time.Hour), Clock: clock.Now,
		Sleep: func(ctx context.Context, d time.Duration) { cancel(); clock.Sleep(ctx, d) }}
	calls := 0
	got, stop := callback.Call(ctx, r, func(context.Context) (string, bool) {
		calls++
		return "n8n is down", true
	})
	if stop != callback.Stopped || calls != 1 || got != "n8n is down" {
		t.Fatalf("stop %v after %d calls, answer %q; want Stopped after 1 with its answer", stop, calls, got)
	}
}
