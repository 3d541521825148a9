package notify_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// A short outage: Slack refuses connections for 20 s while 50 notifications
// queue. The worker runs a pass every second of the test clock; the whole
// backlog must be in Slack within 60 s of Slack answering again, each
// notification once, with at most two log lines per pass.
func TestShortOutageBacklogWithinAMinute(t *testing.T) {
	const n = 50
	slack := slacktest.New(t)
	cfg := testConfig()
	cfg.SlackPause = DefaultSlackPause // the real cap: 5 min
	h := newHarness(t, slack, cfg)
	slack.Off()
	for i := range n {
		h.intake(failureBody(fmt.Sprintf("wf-%d", i), "Node", "boom", fmt.Sprint(i)))
	}
	for range 20 {
		if lines := h.pass(); len(lines) > 2 {
			t.Fatalf("a pass during the outage logged %d lines: %v", len(lines), lines)
		}
		h.clock.Advance(time.Second)
	}
	slack.On()
	back := h.clock.Now()
	for len(h.list(StatusDelivered)) < n {
		if h.clock.Now().Sub(back) > 2*time.Minute {
			t.Fatalf("%d of %d delivered 2 min after Slack came back", len(h.list(StatusDelivered)), n)
		}
		if lines := h.pass(); len(lines) > 2 {
			t.Fatalf("a pass logged %d lines: %v", len(lines), lines)
		}
		h.clock.Advance(time.Second)
	}
	took := h.clock.Now().Sub(back)
	t.Logf("backlog of %d delivered %s after a 20 s outage ended", n, took)
	if took > time.Minute {
		t.Fatalf("backlog took %s after Slack answered again, want ≤ 60 s", took)
	}
	assertDeliveredOnce(t, h, slack, n)
}

// The first pause is short; each failed probe doubles it, up to the cap.
func TestPauseGrowsWhileSlackStaysDown(t *testing.T) {
	slack := slacktest.New(t)
	cfg := testConfig()
	cfg.SlackPause = DefaultSlackPause
	h := newHarness(t, slack, cfg)
	slack.Off()
	h.intake(failureBody("wf", "Node", "boom", "1"))
	var pauses []time.Duration
	for range 8 {
		h.pass()
		pauses = append(pauses, h.svc.Pause())
		h.clock.Advance(h.svc.Pause())
	}
	if p := pauses[0]; p < 10*time.Second || p > 15*time.Second {
		t.Fatalf("first pause %s, want 10–15 s", p)
	}
	for i := 1; i < len(pauses); i++ {
		if pauses[i] < pauses[i-1] && pauses[i] < DefaultSlackPause*8/10 {
			t.Fatalf("pauses do not grow: %v", pauses)
		}
	}
	for _, p := range pauses[5:] {
		if p > DefaultSlackPause || p < DefaultSlackPause*8/10 {
			t.Fatalf("pauses %v: want them capped at %s (jitter below it)", pauses, DefaultSlackPause)
		}
	}
	slack.On()
	h.pass()
	if len(h.list(StatusDelivered)) != 1 || h.svc.Pause() != 0 {
		t.Fatal("not delivered, or the pause not reset, once Slack answered")
	}
}

// Two hours of Slack answering 503 (on a test clock, a pass every 10 s):
// nothing dies, nothing is dropped by a count, and once Slack recovers
// every notification arrives exactly once.
func TestTwoHourOutageDeliversEverythingOnce(t *testing.T) {
	const n = 30
	slack := slacktest.New(t)
	h := newHarness(t, slack, testConfig(), func(o *harnessOptions) {
		o.BackoffInitial, o.BackoffMax = 5*time.Second, 10*time.Minute // the defaults
	})
	slack.SetMode("5xx")
	for i := range n {
		h.intake(failureBody(fmt.Sprintf("wf-%d", i), "Node", "boom", fmt.Sprint(i)))
	}
	end := h.clock.Now().Add(2 * time.Hour)
	for h.clock.Now().Before(end) {
		h.pass()
		h.clock.Advance(10 * time.Second)
	}
	if dead := h.list(StatusDead); len(dead) != 0 {
		t.Fatalf("%d notifications died during a 2-hour outage", len(dead))
	}
	failed := len(slack.Calls())
	slack.SetMode("ok")
	back := h.clock.Now()
	for len(h.list(StatusDelivered)) < n && h.clock.Now().Sub(back) < 15*time.Minute {
		h.pass()
		h.clock.Advance(10 * time.Second)
	}
	took := h.clock.Now().Sub(back)
	t.Logf("%d calls answered 503 in 2 h; all %d delivered %s after recovery", failed, n, took)
	assertDeliveredOnce(t, h, slack, n)
	if took > 90*time.Second {
		t.Fatalf("delivered %s after Slack recovered, want about a minute", took)
	}
	if failed > 2*60*2 {
		t.Fatalf("%d failing calls in 2 h: delivery must slow down while Slack fails", failed)
	}
}

// Over repeated Slack trouble — refused connections, 503s, 429s and posts
// that land but whose answer never comes — 400 notifications arrive, each
// exactly once (counted in the channel itself, by the notification id in
// each message's metadata).
func TestRepeatedOutagesExactlyOnce(t *testing.T) {
	const n = 400
	slack := slacktest.New(t)
	slack.SetSlow(400 * time.Millisecond)
	h := newHarness(t, slack, testConfig(), func(o *harnessOptions) { o.Wire.RequestTimeout = 150 * time.Millisecond })
	round, sent := 0, 0
	for len(h.list(StatusDelivered)) < n {
		round++
		for ; sent < min(n, round*5); sent++ { // failures keep arriving
			h.intake(failureBody(fmt.Sprintf("wf-%d", sent), "Node", "boom", fmt.Sprint(sent)))
		}
		if round > 2000 {
			t.Fatalf("%d of %d delivered after %d rounds", len(h.list(StatusDelivered)), n, round)
		}
		switch round % 20 {
		case 1: // Slack goes away for a while
			slack.Off()
		case 4:
			slack.On()
		case 7, 8: // answers slowly: the posts land, the answers come too late
			slack.Script("slow")
		case 12:
			slack.Script("5xx", "5xx", "5xx")
		case 16:
			slack.Script("429")
		}
		h.pass()
		h.clock.Advance(5 * time.Second)
	}
	perID := map[string]int{}
	for _, m := range slack.History("C0ALERTS") {
		meta, _ := m["metadata"].(map[string]any)
		payload, _ := meta["event_payload"].(map[string]any)
		perID[fmt.Sprint(payload["notification_id"])]++
	}
	twice := 0
	for _, c := range perID {
		if c > 1 {
			twice++
		}
	}
	slow := 0
	for _, c := range slack.Calls() {
		if c.Answer == "slow" {
			slow++
		}
	}
	t.Logf("%d rounds, %d posts answered too late; %d distinct notifications in the channel", round, slow, len(perID))
	if len(perID) != n || twice != 0 || slow == 0 {
		t.Fatalf("%d distinct notifications in the channel, %d of them more than once (%d slow answers); want %d, none twice", len(perID), twice, slow, n)
	}
}
