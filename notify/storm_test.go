package notify_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// stormBody is failure i of a storm: same workflow, node and error, with
// another order number, request id and execution each time.
func stormBody(i int) string {
	return failureBody("orders-sync", "POST to CRM",
		fmt.Sprintf("Order %d failed: timeout after %d ms (req %08x-1a2b-4c3d-8e9f-%012x)", 4000+i, 30000+i%7, i, i*7919),
		fmt.Sprint(100000+i))
}

// storm sends failures from..to-1 concurrently, moving the clock 6 ms per
// failure (10,000 in a minute), and returns how many were grouped.
func storm(t *testing.T, h *harness, t0 time.Time, from, to int) int {
	t.Helper()
	jobs := make(chan int)
	var mu sync.Mutex
	grouped := 0
	var wg sync.WaitGroup
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				a, err := h.svc.Intake(context.Background(), []byte(stormBody(i)))
				if err != nil {
					t.Error(err)
					return
				}
				if a.Status == "grouped" {
					mu.Lock()
					grouped++
					mu.Unlock()
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		h.clock.Set(t0.Add(time.Duration(i) * 6 * time.Millisecond))
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return grouped
}

// A storm: 10,000 identical failures in a minute make at most 3 Slack
// calls, and the message shows the exact count.
func TestStormMakesAtMostThreeSlackCalls(t *testing.T) {
	const total = 10000
	slack := slacktest.New(t)
	h := newHarness(t, slack, testConfig())
	ctx, cancel := contextWithCancel(t)
	done := make(chan error, 1)
	go func() { done <- h.svc.Run(ctx) }()

	t0 := h.clock.Now()
	first := h.intake(stormBody(0))
	if first.Status != "queued" {
		t.Fatalf("first failure: %+v", first)
	}
	// The first is sent at once.
	testwait.For(t, "the first message", func() bool { return len(slack.Delivered("chat.postMessage")) == 1 })
	// ... and recorded as sent at t0 (the storm moves the clock on).
	testwait.For(t, "the first message recorded", func() bool { return len(h.list(StatusDelivered)) == 1 })

	if grouped := storm(t, h, t0, 1, total); grouped != total-1 {
		t.Fatalf("%d of %d later failures grouped", grouped, total-1)
	}
	time.Sleep(50 * time.Millisecond) // several worker rounds
	if n := len(slack.Calls()); n != 1 {
		t.Fatalf("%d Slack calls during the storm minute, want 1", n)
	}

	// Half a window after the post, the count is brought up to date.
	h.clock.Set(t0.Add(DefaultGroupWindow/2 + time.Second))
	testwait.For(t, "the count update", func() bool { return len(slack.Delivered("chat.update")) == 1 })
	// After the window nothing more is due for the group.
	h.clock.Set(t0.Add(2 * DefaultGroupWindow))
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done

	calls := slack.Calls()
	t.Logf("Slack calls for %d identical failures in a minute: %d", total, len(calls))
	if len(calls) > 3 {
		t.Fatalf("%d Slack calls, want at most 3", len(calls))
	}
	last := calls[len(calls)-1]
	if last.Method != "chat.update" || last.TS != calls[0].TS || !strings.Contains(last.Blocks, "*10,000* times") ||
		!strings.Contains(last.Text, "10,000 times") {
		t.Fatalf("last call does not show the exact count:\n%+v", last)
	}
	items := h.list("")
	if len(items) != 1 || items[0].Count != total || items[0].ID != first.NotificationID {
		t.Fatalf("outbox: %+v", items)
	}
}

// A storm while Slack is down is one message with the full count once
// Slack is back: nothing lost, nothing sent twice.
func TestStormDuringOutage(t *testing.T) {
	const total = 2000
	slack := slacktest.New(t)
	h := newHarness(t, slack, testConfig())
	slack.Off()
	t0 := h.clock.Now()
	storm(t, h, t0, 0, total)
	lines := h.pass()
	if len(lines) > 2 {
		t.Fatalf("outage pass logged %d lines", len(lines))
	}
	slack.On()
	h.clock.Advance(time.Minute) // past the pause
	h.pass()
	posts := slack.Delivered("chat.postMessage")
	if len(posts) != 1 || !strings.Contains(posts[0].Blocks, "*2,000* times") {
		t.Fatalf("posts: %+v", posts)
	}
	h.clock.Advance(time.Hour)
	h.pass()
	if len(slack.Calls()) != 1 { // refused connections never reach the fake; the one post did
		t.Fatalf("calls after recovery: %d", len(slack.Calls()))
	}
}
