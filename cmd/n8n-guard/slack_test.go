package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

func signedClick(secret string, ts time.Time, user, action, id string) (http.Header, []byte) {
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user, "name": "ana"},
		"channel": map[string]any{"id": "C0BOOK"},
		"actions": []any{map[string]any{"type": "button", "block_id": "decide", "action_id": action, "value": id}},
	})
	body := []byte("payload=" + url.QueryEscape(string(payload)))
	return slacktest.Sign(secret, ts, body), body
}

func postSigned(t *testing.T, base string, h http.Header, body []byte) (int, string, time.Duration) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/slack/interactions", bytes.NewReader(body))
	req.Header = h
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw), time.Since(start)
}

// From a Slack message to a recorded decision without a token, a CLI or a
// browser: a person clicks "It happened" in Slack, the guard checks
// Slack's signature, resolves the key (its history names the person) and
// updates the message. Then a notification Slack refuses for good is
// listed as dead and re-sent from the CLI once the channel exists.
func TestSlackDecisionEndToEnd(t *testing.T) {
	const secret = "e2e-signing-secret"
	slack := slacktest.New(t)
	slack.FailChannel("C0GONE", "channel_not_found")
	m := NewMain(Config{
		Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"tok"},
		SlackBotToken: "xoxb-test", SlackAPIURL: slack.APIURL(), SlackSigningSecret: secret,
		File: writeConfig(t, `
namespaces:
  bookings:
    owner: U0OFFICE
    channel: C0BOOK
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
owners:
  - workflow: "orders-*"
    owner: U0ORDERS
    channel: C0GONE
`),
	}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()

	_, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "bookings", "key": "B-1", "owner": "exec 9"})
	call(t, base, "tok", http.MethodPost, "/v1/fail", map[string]any{"namespace": "bookings", "key": "B-1", "token": a["token"], "reason": "outcome_unknown"})
	testwait.For(t, "the message about B-1", func() bool { return len(slack.CallsOf("chat.postMessage", "C0BOOK")) == 1 })
	var id string
	testwait.For(t, "the message recorded as delivered", func() bool {
		_, page := call(t, base, "tok", http.MethodGet, "/v1/notifications?state=delivered", nil)
		if items := page["items"].([]any); len(items) == 1 {
			id = items[0].(map[string]any)["id"].(string)
		}
		return id != ""
	})

	for name, click := range map[string]func() (http.Header, []byte){
		"unsigned": func() (http.Header, []byte) {
			_, b := signedClick(secret, time.Now(), "U0OFFICE", "guard_complete", id)
			return http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, b
		},
		"wrong secret": func() (http.Header, []byte) {
			return signedClick("guess", time.Now(), "U0OFFICE", "guard_complete", id)
		},
		"stale": func() (http.Header, []byte) {
			return signedClick(secret, time.Now().Add(-10*time.Minute), "U0OFFICE", "guard_complete", id)
		},
	} {
		h, b := click()
		status, body, _ := postSigned(t, base, h, b)
		if status != http.StatusUnauthorized || !strings.Contains(body, `"code":"unauthorized"`) || strings.Contains(body, `"error"`) {
			t.Fatalf("%s: %d %s", name, status, body)
		}
	}

	h, b := signedClick(secret, time.Now(), "U0OFFICE", "guard_complete", id)
	status, body, took := postSigned(t, base, h, b)
	if status != http.StatusOK || took > 3*time.Second {
		t.Fatalf("signed click: %d %q after %s", status, body, took)
	}
	var rec map[string]any
	testwait.For(t, "the decision on the key", func() bool {
		_, rec = call(t, base, "tok", http.MethodGet, "/v1/lookup?namespace=bookings&key=B-1", nil)
		return rec["state"] == "completed"
	})
	hist := rec["history"].([]any)
	if last := hist[len(hist)-1].(map[string]any); last["event"] != "resolved" || !strings.Contains(last["by"].(string), "U0OFFICE") {
		t.Fatalf("history does not name the Slack user: %v", last)
	}
	testwait.For(t, "the message updated in place", func() bool { return len(slack.CallsOf("chat.update", "C0BOOK")) == 1 })
	if status, _, _ := postSigned(t, base, h, b); status != http.StatusUnauthorized {
		t.Fatalf("a replayed click answered %d", status)
	}

	// Slack refuses the channel for good: dead, listed, re-sent after the fix.
	call(t, base, "tok", http.MethodPost, "/v1/n8n/error", map[string]any{
		"execution": map[string]any{"id": "77", "error": map[string]any{"message": "boom"}},
		"workflow":  map[string]any{"id": "w1", "name": "orders-sync"}})
	vars := map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_TOKEN": "tok"}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := newRootCmd(env(vars), &out, &out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	var dead string
	testwait.For(t, "the dead notification", func() bool {
		out, _ := run("notifications", "list", "--state", "dead", "--json")
		var p struct {
			Items []struct {
				ID          string `json:"id"`
				LastFailure string `json:"last_failure"`
			} `json:"items"`
		}
		if json.Unmarshal([]byte(out), &p) != nil || len(p.Items) != 1 {
			return false
		}
		dead = p.Items[0].ID
		return strings.Contains(p.Items[0].LastFailure, "channel_not_found")
	})
	if st, _ := call(t, base, "tok", http.MethodGet, "/v1/notifications?status=dead&state=pending", nil); st != http.StatusBadRequest {
		t.Fatalf("status and state disagreeing answered %d", st)
	}
	if _, err := run("notifications", "resend", id); err == nil || !strings.Contains(err.Error(), "not dead") {
		t.Fatalf("resending a delivered notification: %v", err)
	}
	slack.FailChannel("C0GONE", "")
	out, err := run("notifications", "resend", dead)
	if err != nil || !strings.Contains(out, "pending again") {
		t.Fatalf("resend: %v %s", err, out)
	}
	testwait.For(t, "the re-sent notification", func() bool { return len(slack.CallsOf("chat.postMessage", "C0GONE")) == 2 })
}
