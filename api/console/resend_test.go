package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/notify"
)

// The channel in the config did not exist: Slack refused the post and the
// notification died. The page says why, with what to do; the operator
// fixes the channel and restarts; the re-send asks first where it goes
// (the channel of the configuration now), goes there, and the page then
// shows the notification as it stands.
func TestResendAsksWhereAndGoesToTheFixedChannel(t *testing.T) {
	slack := newThreadSlack(t, "C0GONE")
	ts := newThreadSite(t, slack, crmConfig("C0GONE"), console.Config{})
	ctx := context.Background()
	a, err := ts.notes.Intake(ctx, []byte(crmFailure))
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the notification dies", func() bool {
		p, err := ts.notes.List(ctx, notify.ListQuery{Status: notify.StatusDead})
		return err == nil && len(p.Items) == 1
	})

	// The config is fixed and the guard restarted.
	ts.stop()
	ts.start(t, slack, crmConfig("C0CRMONCALL"))
	ts.site = ts.console(t, console.Config{})
	c, csrf := signedIn(t, ts.site, actToken)

	_, page := fetch(t, c, ts.url+"/ui/notifications?status=dead")
	if !strings.Contains(page, "channel_not_found") || !strings.Contains(page, "What to do: "+hintText()) {
		t.Errorf("the dead notification does not say why with the hint:\n%s", page)
	}
	_, page = fetch(t, c, ts.url+"/ui/notifications?resend="+a.NotificationID)
	d := parsePage(t, page)
	if got := textOf(d.byID("confirm-h")); got != "Re-send to C0CRMONCALL (owner U0ANA)?" {
		t.Errorf("the confirmation asks %q", got)
	}
	if got := textOf(d.byID("resend-why")); !strings.Contains(got, "chat.postMessage: channel_not_found") || !strings.Contains(got, hintText()) {
		t.Errorf("the confirmation says why it died: %q", got)
	}
	if len(slack.Calls("chat.postMessage")) != 1 {
		t.Fatal("asking where it goes sent it")
	}

	resp := postForm(t, c, ts.url+"/ui/notifications/resend", url.Values{"csrf": {csrf}, "id": {a.NotificationID}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("re-send: %d", resp.StatusCode)
	}
	testwait.For(t, "the re-send is posted", func() bool { return len(slack.Calls("chat.postMessage")) == 2 })
	if got := slack.Calls("chat.postMessage")[1].Channel; got != "C0CRMONCALL" {
		t.Fatalf("re-sent to %s, want the fixed channel C0CRMONCALL", got)
	}
	testwait.For(t, "delivered", func() bool {
		p, err := ts.notes.List(ctx, notify.ListQuery{Status: notify.StatusDelivered})
		return err == nil && len(p.Items) == 1
	})
	_, page = fetch(t, c, ts.url+resp.Header.Get("Location"))
	d = parsePage(t, page)
	if got := textOf(d.byID("resent")); !strings.Contains(got, "is delivered now") || !strings.Contains(got, "C0CRMONCALL") {
		t.Errorf("after the re-send the page says %q", got)
	}
	if strings.Contains(page, "No notification is pending") || d.byID("notifications-empty") != nil {
		t.Errorf("the page says nothing is there after the re-send:\n%s", page)
	}
}

// hintText is what the slack package says about channel_not_found.
func hintText() string {
	return "the channel ID in the notify config does not exist (use the channel ID C…, not its name)"
}
