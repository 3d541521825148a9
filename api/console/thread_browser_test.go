package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/notify"
)

// In a real browser: the key page's links lead where they say, the
// breaker link opens the destination's page, and a failed execution is
// acknowledged from the failures page.
func TestBrowserThreadLinksAndFailures(t *testing.T) {
	slack := newThreadSlack(t)
	ts := newThreadSite(t, slack, crmConfig("C0CRMONCALL"),
		console.Config{N8nURL: "https://n8n.example.org", SlackWorkspace: "acme"})
	reserveUnknown(t, ts.store, "crm", "lead-1", "n8n LeadCrm00000001 exec 48016", "hubspot")
	ctx := context.Background()
	for range 2 {
		if _, err := ts.notes.Intake(ctx, []byte(crmFailure)); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "both messages are in Slack", func() bool { return len(slack.Calls("chat.postMessage")) == 2 })
	var msg = new(notify.Record)
	// The record learns its Slack ts once chat.postMessage has answered
	// and the delivery is written: wait for that, not only for the call.
	testwait.For(t, "the message's Slack ts is recorded", func() bool {
		m, _ := ts.notes.AboutKey(ctx, "crm", "lead-1")
		if m != nil && m.SlackTS != "" {
			msg = m
			return true
		}
		return false
	})

	b := newBrowser(t, ts.site, 1280, 900)
	b.signIn(actToken)
	b.openKey("crm", "lead-1", "#thread")
	b.shot("key")
	hrefs := get(b, "links", chromedp.Evaluate[map[string]string](`(() => {
		const h = s => { const a = document.querySelector(s); return a ? a.href : "" };
		return {execution: h("#holder-execution"), workflow: h("#holder-workflow"), owner: h("#owner a"),
			runbook: h("#runbook a"), slack: h("#slack a"), breaker: h("#breaker")};
	})()`))
	for what, want := range map[string]string{
		"execution": "https://n8n.example.org/workflow/LeadCrm00000001/executions/48016",
		"workflow":  "https://n8n.example.org/workflow/LeadCrm00000001",
		"owner":     "https://acme.slack.com/team/U0ANA",
		"runbook":   "https://wiki.example.org/runbooks/crm",
		"slack":     "https://acme.slack.com/archives/C0CRMONCALL/p" + strings.ReplaceAll(msg.SlackTS, ".", ""),
		"breaker":   ts.url + "/ui/destination?name=hubspot",
	} {
		if hrefs[what] != want {
			t.Errorf("%s link %q, want %q", what, hrefs[what], want)
		}
	}
	if got := b.text("#holder"); got != "n8n execution 48016 of workflow LeadCrm00000001" {
		t.Errorf("the holder reads %q", got)
	}
	b.run("open the breaker", chromedp.Click(chromedp.CSS(`#breaker`)), chromedp.WaitVisible(chromedp.CSS(`#dest-name`)))
	if got := b.text("#dest-name"); got != "hubspot" {
		t.Errorf("the breaker link opened %q", got)
	}

	b.run("open the failures", chromedp.Click(chromedp.CSS(`a[href="/ui/failures"]`)), chromedp.WaitVisible(chromedp.CSS(`#failures`)))
	b.shot("failures")
	row := b.text("#failures tbody tr")
	for _, want := range []string{"orders-leads", "POST lead", "HTTP 500 from the CRM", "48016", "open"} {
		if !strings.Contains(row, want) {
			t.Errorf("the failure row lacks %q: %s", want, row)
		}
	}
	b.run("acknowledge", chromedp.Click(chromedp.CSS(`#failures tbody button[value=acknowledge]`)),
		chromedp.WaitVisible(chromedp.CSS(`#failure-done`)))
	b.shot("failures-acknowledged")
	if row := b.text("#failures tbody tr"); !strings.Contains(row, "acknowledged by console: on-call") {
		t.Errorf("after the acknowledgement the row reads %q", row)
	}
	if b.exists(`#failures tbody button`) {
		t.Error("the buttons stay after the acknowledgement")
	}

	// On a phone.
	phone := newBrowser(t, ts.site, 390, 844)
	phone.signIn(actToken)
	phone.run("failures on a phone", chromedp.Navigate(ts.url+"/ui/failures"), chromedp.WaitVisible(chromedp.CSS(`#failures`)))
	phone.shot("failures-390")
	phone.openKey("crm", "lead-1", "#thread")
	phone.shot("key-390")
}

// In a real browser: a dead notification says why with the hint; the
// re-send asks where it goes first, then shows where it stands.
func TestBrowserResendConfirms(t *testing.T) {
	slack := newThreadSlack(t, "C0GONE")
	ts := newThreadSite(t, slack, crmConfig("C0GONE"), console.Config{})
	ctx := context.Background()
	if _, err := ts.notes.Intake(ctx, []byte(crmFailure)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the notification dies", func() bool { return len(slack.Calls("chat.postMessage")) == 1 })
	ts.stop()
	ts.start(t, slack, crmConfig("C0CRMONCALL"))
	ts.site = ts.console(t, console.Config{})

	b := newBrowser(t, ts.site, 1280, 900)
	b.signIn(actToken)
	b.run("dead notifications", chromedp.Navigate(ts.url+"/ui/notifications?status=dead"), chromedp.WaitVisible(chromedp.CSS(`#notifications`)))
	if got := b.text("#notifications tbody tr"); !strings.Contains(got, "What to do: "+hintText()) {
		t.Errorf("the dead row reads %q", got)
	}
	b.run("ask to re-send", chromedp.Click(chromedp.CSS(`#notifications tbody button`)), chromedp.WaitVisible(chromedp.CSS(`#resend-confirm`)))
	b.shot("confirm")
	if got := b.text("#confirm-h"); got != "Re-send to C0CRMONCALL (owner U0ANA)?" {
		t.Errorf("the confirmation asks %q", got)
	}
	b.run("re-send", chromedp.Click(chromedp.CSS(`#resend-submit`)), chromedp.WaitVisible(chromedp.CSS(`#resent`)))
	b.shot("resent")
	if got := b.text("#resent"); !strings.Contains(got, "C0CRMONCALL") || strings.Contains(got, "dead") {
		t.Errorf("after the re-send the page says %q", got)
	}
	if b.exists("#notifications-empty") {
		t.Error("the page says no notification is there after the re-send")
	}
}
