package notify_test

import (
	"context"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// The channel in the config did not exist, so Slack refused the post and
// the notification died. The operator fixes the channel and restarts; the
// re-send goes to the channel of the configuration now, not to the one
// stored when the failure came in.
func TestResendGoesWhereTheConfigSaysNow(t *testing.T) {
	slack := slacktest.New(t)
	slack.Script("channel_not_found")
	cfg := testConfig()
	cfg.Owners[0].Channel = "C0GONE"
	h := newHarness(t, slack, cfg)
	a := h.intake(failureBody("orders-main", "POST to Go", "HTTP 500", "41"))
	h.pass()
	if dead := h.list(StatusDead); len(dead) != 1 || dead[0].Channel != "C0GONE" {
		t.Fatalf("dead: %+v", dead)
	}

	h.cfg.Owners[0].Channel, h.cfg.Owners[0].Owner = "C0CRMONCALL", "U0ANA"
	h.restart()
	plan, err := h.svc.PlanResend(context.Background(), a.NotificationID)
	if err != nil || plan.To.Channel != "C0CRMONCALL" || plan.To.Owner != "U0ANA" || plan.Channel != "C0GONE" {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	n, err := h.svc.Resend(context.Background(), a.NotificationID)
	if err != nil {
		t.Fatal(err)
	}
	if n.Channel != "C0CRMONCALL" || n.Owner != "U0ANA" || n.Status != StatusPending {
		t.Fatalf("the answer says it goes to %s (owner %s), status %s", n.Channel, n.Owner, n.Status)
	}
	h.pass()
	posts := slack.Delivered("chat.postMessage")
	if len(posts) != 1 || posts[0].Channel != "C0CRMONCALL" {
		t.Fatalf("posted: %+v", posts)
	}
	if got := h.list(StatusDelivered); len(got) != 1 || got[0].Channel != "C0CRMONCALL" {
		t.Fatalf("delivered: %+v", got)
	}
}
