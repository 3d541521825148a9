package notify_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	. "github.com/n8n-guard/n8n-guard/notify"
)

func TestDeliveryAnswers(t *testing.T) {
	cases := []struct {
		name string
		// script: the fake's answers to the first calls, then "ok".
		script []string
		// steps: clock advances, one worker pass after each.
		steps []time.Duration
		// postsAfter: Slack calls made after each pass (cumulative).
		postsAfter []int
		want       Status
		attempts   int
		dead       float64
		retryFor   time.Duration
	}{
		{name: "ok at once", steps: []time.Duration{0}, postsAfter: []int{1}, want: StatusDelivered, attempts: 1},
		{name: "429 honours Retry-After (7 s)", script: []string{"429"},
			steps:      []time.Duration{0, 6 * time.Second, 1 * time.Second},
			postsAfter: []int{1, 1, 2}, want: StatusDelivered, attempts: 1}, // a 429 is Slack's pace, not a failed try
		{name: "5xx backs off, then delivered", script: []string{"5xx", "5xx"},
			steps:      []time.Duration{0, 0, time.Hour, time.Hour},
			postsAfter: []int{1, 1, 2, 3}, want: StatusDelivered, attempts: 3},
		{name: "channel_not_found is dead at once", script: []string{"channel_not_found"},
			steps: []time.Duration{0, time.Hour}, postsAfter: []int{1, 1}, want: StatusDead, attempts: 1, dead: 1},
		{name: "not_in_channel is dead at once", script: []string{"not_in_channel"},
			steps: []time.Duration{0, time.Hour}, postsAfter: []int{1, 1}, want: StatusDead, attempts: 1, dead: 1},
		{name: "invalid_auth is dead at once", script: []string{"invalid_auth"},
			steps: []time.Duration{0}, postsAfter: []int{1}, want: StatusDead, attempts: 1, dead: 1},
		{name: "ten transient failures: still retried, then delivered", script: strings.Split(strings.Repeat("5xx,", 10), ",")[:10],
			steps:      []time.Duration{0, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour},
			postsAfter: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, want: StatusDelivered, attempts: 11},
		{name: "transient failures for longer than retry_for: dead", retryFor: 3 * time.Hour,
			script:     strings.Split(strings.Repeat("5xx,", 10), ",")[:10],
			steps:      []time.Duration{0, time.Hour, time.Hour, time.Hour, time.Hour},
			postsAfter: []int{1, 2, 3, 4, 4}, want: StatusDead, attempts: 4, dead: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			slack := slacktest.New(t)
			slack.SetRetryAfter(7)
			slack.Script(tc.script...)
			cfg := testConfig()
			cfg.RetryFor = tc.retryFor
			h := newHarness(t, slack, cfg)
			h.intake(fixture(t, "error-trigger-http-node.json"))
			for i, d := range tc.steps {
				h.clock.Advance(d)
				h.pass()
				if got := len(slack.Calls()); got != tc.postsAfter[i] {
					t.Fatalf("after pass %d: %d Slack calls, want %d", i, got, tc.postsAfter[i])
				}
			}
			items := h.list("")
			if len(items) != 1 {
				t.Fatalf("%d notifications", len(items))
			}
			n := items[0]
			if n.Status != tc.want || n.Attempts != tc.attempts {
				t.Fatalf("status %s attempts %d (last failure %q), want %s/%d", n.Status, n.Attempts, n.LastFailure, tc.want, tc.attempts)
			}
			if tc.want == StatusDelivered && n.DeliveredAt == nil {
				t.Fatal("delivered_at not set")
			}
			if tc.want == StatusDead {
				if len(h.list(StatusDead)) != 1 || n.LastFailure == "" {
					t.Fatalf("dead notification not listed with its reason: %+v", n)
				}
				if h.logs.Matching("dead") != 1 {
					t.Fatalf("dead must be logged exactly once:\n%s", strings.Join(h.logs.Lines(), "\n"))
				}
			}
			if got := counterValue(t, h.reg, "n8n_guard_notify_dead_total"); got != tc.dead {
				t.Fatalf("dead metric %v, want %v", got, tc.dead)
			}
		})
	}
}

// An outage: Slack refuses connections. One pass makes one attempt and
// logs one line; nothing is marked; after recovery every notification is
// delivered exactly once.
func TestOutageThenRecovery(t *testing.T) {
	const n = 20
	slack := slacktest.New(t)
	h := newHarness(t, slack, testConfig())
	slack.Off()
	for i := range n {
		h.intake(failureBody(fmt.Sprintf("wf-%d", i), "Node", "boom", fmt.Sprint(i)))
	}
	lines := h.pass()
	if len(lines) > 2 || h.logs.Matching(fmt.Sprintf("Slack unreachable, %d notifications waiting", n)) != 1 {
		t.Fatalf("first pass of an outage logged:\n%s", strings.Join(lines, "\n"))
	}
	if got := h.wire.Count(); got != 1 {
		t.Fatalf("pass went on after Slack was unreachable: %d requests", got)
	}
	// While paused: no calls, no lines.
	for range 5 {
		if lines := h.pass(); len(lines) != 0 {
			t.Fatalf("paused pass logged: %v", lines)
		}
	}
	if got := h.wire.Count(); got != 1 {
		t.Fatalf("calls while the breaker is open: %d", got)
	}
	// The pause ends: one probe, still down, one line.
	h.clock.Advance(time.Minute) // past the pause
	if lines := h.pass(); len(lines) > 2 {
		t.Fatalf("probe pass logged: %v", lines)
	}
	if got := h.wire.Count(); got != 2 {
		t.Fatalf("probe: %d requests, want 2", got)
	}
	for _, it := range h.list("") {
		if it.Status != StatusPending || it.Attempts != 0 {
			t.Fatalf("an unreachable Slack changed a notification: %+v", it)
		}
	}

	if got := counterValue(t, h.reg, "n8n_guard_notify_slack_breaker_open"); got != 1 {
		t.Fatalf("breaker gauge %v during the outage", got)
	}

	slack.On()
	h.clock.Advance(time.Minute) // past the pause
	lines = h.pass()
	if got := counterValue(t, h.reg, "n8n_guard_notify_slack_breaker_open"); got != 0 {
		t.Fatalf("breaker gauge %v after recovery", got)
	}
	if len(lines) > 2 {
		t.Fatalf("recovery pass logged %d lines: %v", len(lines), lines)
	}
	assertDeliveredOnce(t, h, slack, n)
}

// A restart in the middle of an outage loses nothing: the outbox is on disk.
func TestRestartMidOutage(t *testing.T) {
	slack := slacktest.New(t)
	restartMidOutage(t, newHarness(t, slack, testConfig()), slack, 5)
}

// restartMidOutage: Slack goes down, n failures arrive, the process dies
// and starts again while Slack is still down; none is lost, and once Slack
// is back (the first pass after the pause) each is delivered exactly once.
func restartMidOutage(t *testing.T, h *harness, slack *slacktest.Server, n int) {
	t.Helper()
	slack.Off()
	for i := range n {
		h.intake(failureBody(fmt.Sprintf("wf-%d", i), "Node", "boom", fmt.Sprint(i)))
	}
	h.pass()
	h.restart()
	h.pass()
	if len(h.list(StatusPending)) != n {
		t.Fatal("notifications lost over the restart")
	}
	slack.On()
	h.clock.Advance(time.Minute) // past the pause
	h.pass()
	assertDeliveredOnce(t, h, slack, n)
}

func assertDeliveredOnce(t *testing.T, h *harness, slack *slacktest.Server, n int) {
	t.Helper()
	posts := slack.Delivered("chat.postMessage")
	seen := map[string]int{}
	for _, p := range posts {
		i := strings.Index(p.Blocks, "ref `")
		seen[p.Blocks[i:i+30]]++
	}
	if len(posts) != n || len(seen) != n {
		t.Fatalf("%d posts of %d distinct notifications, want %d each once", len(posts), len(seen), n)
	}
	if got := len(h.list(StatusDelivered)); got != n {
		t.Fatalf("%d delivered in the outbox, want %d", got, n)
	}
}

// A Slack that accepts the connection but answers too late is unreachable
// too: the request times out, the breaker opens, nothing is marked sent.
func TestSlowSlackTimesOut(t *testing.T) {
	slack := slacktest.New(t)
	slack.SetSlow(2 * time.Second)
	slack.SetMode("slow")
	h := newHarness(t, slack, testConfig(), func(o *harnessOptions) { o.Wire.RequestTimeout = 200 * time.Millisecond })
	h.intake(failureBody("wf", "Node", "boom", "1"))
	h.intake(failureBody("wf2", "Node", "boom", "2"))
	start := time.Now()
	lines := h.pass()
	if time.Since(start) > 1500*time.Millisecond { // the fake answers after 2 s
		t.Fatal("the per-request timeout was not applied")
	}
	if h.wire.Count() != 1 || len(lines) != 1 || !strings.Contains(lines[0], "Slack unreachable, 2 notifications waiting") {
		t.Fatalf("requests %d, lines %v", h.wire.Count(), lines)
	}
	if len(h.list(StatusPending)) != 2 {
		t.Fatal("a timed-out call marked a notification")
	}
	slack.SetMode("ok")
	h.clock.Advance(time.Minute) // past the pause
	h.pass()
	if len(h.list(StatusDelivered)) != 2 {
		t.Fatal("not delivered after Slack answered again")
	}
	// The first post landed although its answer never came: it is found
	// in the channel by its metadata, not posted again.
	posts := 0
	for _, c := range slack.Calls() {
		if c.Method == "chat.postMessage" {
			posts++
		}
	}
	if posts != 2 || len(slack.History("C0ALERTS")) != 2 {
		t.Fatalf("%d posts, %d messages in the channel; want 2 each (no double post)", posts, len(slack.History("C0ALERTS")))
	}
}

func TestNoSlackConfigured(t *testing.T) {
	h := newHarness(t, nil, testConfig())
	h.intake(failureBody("wf", "Node", "boom", "1"))
	ctx, cancel := contextWithCancel(t)
	done := make(chan error)
	go func() { done <- h.svc.Run(ctx) }()
	testwait.For(t, "the start's word that Slack is not configured", func() bool { return h.logs.Matching("Slack is not configured") > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h.logs.Matching("Slack is not configured") != 1 {
		t.Fatalf("logs: %v", h.logs.Lines())
	}
	if len(h.list(StatusPending)) != 1 {
		t.Fatal("notification not kept while Slack is not configured")
	}
}

func TestPurgeAfterRetention(t *testing.T) {
	slack := slacktest.New(t)
	cfg := testConfig()
	cfg.Retention = 48 * time.Hour
	h := newHarness(t, slack, cfg)
	h.intake(failureBody("wf", "Node", "boom", "1"))
	h.pass()
	slack.Off()
	h.intake(failureBody("wf2", "Node", "boom", "2")) // stays pending
	h.clock.Advance(47 * time.Hour)
	h.svc.PurgeNow()
	h.pass()
	if len(h.list("")) != 2 {
		t.Fatal("purged before the retention")
	}
	h.clock.Advance(2 * time.Hour)
	h.svc.PurgeNow()
	h.pass()
	items := h.list("")
	if len(items) != 1 || items[0].Status != StatusPending {
		t.Fatalf("after retention: %+v", items)
	}
}

func TestListPaging(t *testing.T) {
	h := newHarness(t, nil, testConfig())
	var ids []string
	for i := range 7 {
		h.clock.Advance(time.Second)
		ids = append(ids, h.intake(failureBody(fmt.Sprintf("wf-%d", i), "N", "m", fmt.Sprint(i))).NotificationID)
	}
	var got []string
	cursor := ""
	for {
		p, err := h.svc.List(t.Context(), ListQuery{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			got = append(got, it.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(got) != 7 || got[0] != ids[6] || got[6] != ids[0] {
		t.Fatalf("pages newest first: got %v, ids %v", got, ids)
	}
	for _, q := range []ListQuery{{Status: "sent"}, {Limit: 1000}, {Cursor: "nope"}} {
		if _, err := h.svc.List(t.Context(), q); err == nil {
			t.Errorf("query %+v accepted", q)
		}
	}
	if p, _ := h.svc.List(t.Context(), ListQuery{Status: StatusDead}); p.Items == nil || len(p.Items) != 0 {
		t.Fatal("an empty page must have items: []")
	}
}
