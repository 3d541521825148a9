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

// Acknowledging in the console a failed execution whose Slack message
// died: the overview still names its owner (the owner was not told, not
// gone), the confirmation says no Slack message shows it, and the audit
// lists who acknowledged it. A read-limited token sees no such row.
func TestAcknowledgingAFailureWhoseSlackMessageDied(t *testing.T) {
	slack := newThreadSlack(t, "C0CRMONCALL") // Slack refuses the owner's channel: the message dies
	ts := newThreadSite(t, slack, crmConfig("C0CRMONCALL"), console.Config{N8nURL: "https://n8n.example.org"})
	ctx := context.Background()
	a, err := ts.notes.Intake(ctx, []byte(crmFailure))
	if err != nil {
		t.Fatal(err)
	}
	id := a.NotificationID
	testwait.For(t, "the failure's Slack message is dead", func() bool {
		r, err := ts.outbox.Get(ctx, id)
		return err == nil && r != nil && r.Status == notify.StatusDead
	})
	c, csrf := signedIn(t, ts.site, actToken)
	owner := func(page string) string {
		t.Helper()
		var out []string
		parsePage(t, page).find(func(n *html.Node) bool {
			if n.Data == "li" && (attr(n, "data-need") == "not-told" || attr(n, "data-need") == "dead-notes") {
				out = append(out, attr(n, "data-need")+": "+textOf(n))
			}
			return false
		})
		return strings.Join(out, " | ")
	}
	_, page := fetch(t, c, ts.url+"/ui/")
	if got := owner(page); !strings.Contains(got, "not-told") || !strings.Contains(got, "U0ANA") {
		t.Fatalf("before the acknowledgement the overview reads %q, want the failure not told to U0ANA", got)
	}

	resp := postForm(t, c, ts.url+"/ui/failures/ack", url.Values{"csrf": {csrf}, "id": {id}, "action": {"acknowledge"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("acknowledge: %d", resp.StatusCode)
	}
	_, page = fetch(t, c, ts.url+resp.Header.Get("Location"))
	done := parsePage(t, page).byID("failure-done")
	if done == nil {
		t.Fatalf("no confirmation:\n%s", page)
	}
	if text := textOf(done); strings.Contains(text, "Slack message says") || !strings.Contains(text, "could not be delivered") || !strings.Contains(text, "audit") {
		t.Errorf("the confirmation reads %q: it must say the Slack message died, not that it says you are on it", text)
	}

	_, page = fetch(t, c, ts.url+"/ui/")
	if got := owner(page); strings.Contains(got, "none configured") || !strings.Contains(got, "U0ANA") {
		t.Errorf("after the acknowledgement the overview reads %q, want its owner U0ANA still named", got)
	}

	_, page = fetch(t, c, ts.url+"/ui/audit")
	row := parsePage(t, page).find(func(n *html.Node) bool {
		return n.Data == "tr" && strings.Contains(textOf(n), "acknowledged the failed execution 48016")
	})
	if row == nil {
		t.Fatalf("the audit does not list the acknowledgement:\n%s", page)
	}
	if text := textOf(row); !strings.Contains(text, "console: on-call") || !strings.Contains(text, "orders-leads") || !strings.Contains(text, "not told") {
		t.Errorf("the audit row reads %q, want who, the workflow and that its owner was not told", text)
	}
	// A reader limited to namespaces does not see failures (not kept by
	// namespace), in the audit either.
	limited, _ := signedIn(t, ts.site, limitedToken)
	if _, p := fetch(t, limited, ts.url+"/ui/audit"); strings.Contains(p, "48016") {
		t.Error("a reader limited to a namespace sees the failure's decision in the audit")
	}
}
