package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/notify"
)

// A refused re-run names the key, who allowed it (mentioned when they
// clicked in Slack, so they hear it where they clicked) and n8n's words;
// a bulk says how many.
func TestARefusedRerunNamesWhoAllowedItAndWhy(t *testing.T) {
	r := &notify.Record{}
	r.Kind, r.ID, r.Count = notify.KindRerunRefused, "n_1", 1
	r.Namespace, r.Key, r.KeyAttempt = "crm", "evt_<1>", 2
	r.RerunBy, r.Message = "Ana (Slack U0ANA)", "n8n refused the re-run: HTTP 404 gone"
	text := func(r *notify.Record) (string, string) {
		m := renderKind(notify.Message{Record: r, Mention: "<@U0OWNER>"})
		b, err := json.Marshal(m.Blocks)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), m.Text
	}
	blocks, fb := text(r)
	for _, want := range []string{"Re-run not started: crm", "\\u003c@U0OWNER\\u003e: the re-run of key `evt_\\u0026lt;1\\u0026gt;` in `crm` that \\u003c@U0ANA\\u003e allowed did not start: n8n refused the re-run: HTTP 404 gone. Nothing was written; the key stays failed.",
		"Allow it again in the console once the cause is fixed, or let its sender send the event again.", "attempt 2"} {
		if !strings.Contains(blocks, want) {
			t.Errorf("the message lacks %q:\n%s", want, blocks)
		}
	}
	if !strings.Contains(fb, "<@U0ANA>") || !strings.Contains(fb, "HTTP 404 gone") || strings.Contains(fb, "\n") {
		t.Errorf("fallback: %q", fb)
	}
	r.RerunBy, r.Count = "Bo <!channel>", 500
	blocks, _ = text(r)
	if strings.Contains(blocks, "\\u003c!channel\\u003e") || !strings.Contains(blocks, "*500* re-runs in `crm` were not started") {
		t.Errorf("a bulk by a console user:\n%s", blocks)
	}
}
