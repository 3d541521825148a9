package notify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// n8n turning off a guarded workflow reaches the workflow's owner (the
// owners rules, as its failed executions do) once per time off: a second
// report of the same time off, also after a restart (or from another
// replica), adds nothing; a new time off is told again.
func TestTellWorkflowOffReachesTheOwnerOnce(t *testing.T) {
	slack := slacktest.New(t)
	h := newHarness(t, slack, testConfig())
	ctx := context.Background()
	off := WorkflowOff{WorkflowID: "W7", WorkflowName: "orders-sync", Episode: "2026-12-07T01:00:00.000Z",
		Text: "n8n turned off workflow \"orders-sync\" (W7), which holds a guarded write: open its last executions in n8n, fix the crash, then publish it again."}
	a, err := h.svc.TellWorkflowOff(ctx, off)
	if err != nil || a.Status != "queued" || a.Owner != "U0ORDERS" {
		t.Fatalf("first tell: %+v %v, want queued for the owner U0ORDERS", a, err)
	}
	if a, err := h.svc.TellWorkflowOff(ctx, off); err != nil || a.Status != "skipped" {
		t.Fatalf("the same time off again: %+v %v, want skipped", a, err)
	}
	h.restart()
	if a, err := h.svc.TellWorkflowOff(ctx, off); err != nil || a.Status != "skipped" {
		t.Fatalf("the same time off after a restart: %+v %v, want skipped", a, err)
	}
	h.pass()
	posts := slack.Delivered("chat.postMessage")
	if len(posts) != 1 || posts[0].Channel != "C0ORDERS" || !strings.Contains(posts[0].Text, "turned off workflow") || !strings.Contains(posts[0].Text, "U0ORDERS") {
		t.Fatalf("posts %+v, want one in C0ORDERS naming U0ORDERS and saying the workflow was turned off", posts)
	}
	off.Episode = "2026-12-07T02:00:00.000Z"
	if a, err := h.svc.TellWorkflowOff(ctx, off); err != nil || a.Status != "queued" {
		t.Fatalf("a new time off: %+v %v, want queued", a, err)
	}
}
