package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/notify"
)

const crmFailure = `{"execution":{"id":"48016","url":"","error":{"message":"HTTP 500 from the CRM","name":"NodeApiError"},"lastNodeExecuted":"POST lead"},"workflow":{"id":"LeadCrm00000001","name":"orders-leads"}}`

// The failed executions page lists what n8n's error workflow reported,
// a storm as one row with its count; acknowledging one there goes the
// Slack buttons' way: the message in Slack is updated and says who.
func TestFailuresPageListsAndAcknowledges(t *testing.T) {
	slack := newThreadSlack(t)
	ts := newThreadSite(t, slack, crmConfig("C0CRMONCALL"), console.Config{N8nURL: "https://n8n.example.org"})
	ctx := context.Background()
	var id string
	for range 3 {
		a, err := ts.notes.Intake(ctx, []byte(crmFailure))
		if err != nil {
			t.Fatal(err)
		}
		id = a.NotificationID
	}
	testwait.For(t, "the failure is in Slack", func() bool { return len(slack.Calls("chat.postMessage")) == 1 })

	c, csrf := signedIn(t, ts.site, actToken)
	_, page := fetch(t, c, ts.url+"/ui/failures")
	d := parsePage(t, page)
	row := d.find(func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-id") == id })
	if row == nil {
		t.Fatalf("no row for %s:\n%s", id, page)
	}
	text := textOf(row)
	for _, want := range []string{"orders-leads", "POST lead", "HTTP 500 from the CRM", "48016", " 3 ", "open", "Acknowledge", "Snooze 1 h"} {
		if !strings.Contains(" "+text+" ", want) {
			t.Errorf("the row lacks %q: %s", want, text)
		}
	}
	exec := (doc{row}).find(func(n *html.Node) bool { return attr(n, "class") == "execution" })
	if exec == nil || attr(exec, "href") != "https://n8n.example.org/workflow/LeadCrm00000001/executions/48016" {
		t.Errorf("execution link: %v", exec)
	}
	if d.find(func(n *html.Node) bool { return n.Data == "a" && attr(n, "href") == "/ui/failures" }) == nil {
		t.Error("the nav has no link to the failures page")
	}

	// A read role sees it but may not act.
	reader, rcsrf := signedIn(t, ts.site, readToken)
	if _, p := fetch(t, reader, ts.url+"/ui/failures"); !strings.Contains(p, "orders-leads") || strings.Contains(p, "/ui/failures/ack") {
		t.Error("a read role: the row is missing or the buttons are offered")
	}
	resp := postForm(t, reader, ts.url+"/ui/failures/ack", url.Values{"csrf": {rcsrf}, "id": {id}, "action": {"acknowledge"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read role acknowledges: %d", resp.StatusCode)
	}
	// Bad input changes nothing.
	resp = postForm(t, c, ts.url+"/ui/failures/ack", url.Values{"csrf": {csrf}, "id": {id}, "action": {"forget"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown action: %d", resp.StatusCode)
	}

	resp = postForm(t, c, ts.url+"/ui/failures/ack", url.Values{"csrf": {csrf}, "id": {id}, "action": {"acknowledge"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("acknowledge: %d", resp.StatusCode)
	}
	_, page = fetch(t, c, ts.url+resp.Header.Get("Location"))
	d = parsePage(t, page)
	row = d.find(func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-id") == id })
	if text := textOf(row); !strings.Contains(text, "acknowledged by console: on-call") || strings.Contains(text, "Acknowledge ") {
		t.Errorf("after the acknowledgement the row reads: %s", text)
	}
	if d.byID("failure-done") == nil {
		t.Error("no confirmation after the acknowledgement")
	}
	// The Slack message says it, as after a click on its button.
	testwait.For(t, "the Slack message is updated", func() bool {
		for _, u := range slack.Calls("chat.update") {
			if strings.Contains(u.Text+u.Blocks, "acknowledged") && strings.Contains(u.Text+u.Blocks, "on-call") {
				return true
			}
		}
		return false
	})
	// Once taken, a second decision changes nothing.
	resp = postForm(t, c, ts.url+"/ui/failures/ack", url.Values{"csrf": {csrf}, "id": {id}, "action": {"snooze"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("snooze after acknowledge: %d", resp.StatusCode)
	}
	r, err := ts.outbox.Get(ctx, id)
	if err != nil || r.Decision != notify.DecisionAcknowledged || r.DecidedByName != "console: on-call" || r.EscalateAt != nil {
		t.Fatalf("stored: %+v %v", r.Decided, err)
	}
}
