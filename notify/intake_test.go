package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
)

func TestIntakeVariants(t *testing.T) {
	cases := []struct {
		name     string
		body     string
		wantErr  bool
		workflow string
		node     string
		exec     string
		kind     string
	}{
		{name: "HTTP node failing with 500 (real n8n 1.113.3)", body: fixture(t, "error-trigger-http-node.json"),
			workflow: "orders-main", node: "POST to Go", exec: "3"},
		{name: "Code node throwing (real n8n 1.113.3)", body: fixture(t, "error-trigger-code-node.json"),
			workflow: "orders-main", node: "Normalize", exec: "5"},
		{name: "trigger variant from n8n's docs", body: fixture(t, "error-trigger-trigger-node.json"),
			workflow: "orders-from-queue", node: "", exec: ""},
		{name: "execution with nothing inside", body: `{"execution":{}}`},
		{name: "trigger with nothing inside", body: `{"trigger":{}}`},
		{name: "numbers where strings are expected", body: `{"execution":{"id":4711,"retryOf":4710,"error":{"httpCode":500,"message":"x"}},"workflow":{"id":7,"name":"n"}}`,
			workflow: "n", exec: "4711"},
		{name: "one-item array as an HTTP node may send", body: `[{"execution":{"id":"9","lastNodeExecuted":"A"},"workflow":{"name":"w"}}]`,
			workflow: "w", node: "A", exec: "9"},
		{name: "neither variant", body: `{"workflow":{"id":"1","name":"x"}}`, wantErr: true},
		{name: "execution is not an object", body: `{"execution":"boom"}`, wantErr: true},
		{name: "not JSON", body: `execution failed`, wantErr: true},
		{name: "empty body", body: ``, wantErr: true},
	}
	h := newHarness(t, nil, testConfig())
	for _, tc := range cases {
		h.clock.Advance(DefaultGroupWindow) // each case its own group
		t.Run(tc.name, func(t *testing.T) {
			a, err := h.svc.Intake(context.Background(), []byte(tc.body))
			if tc.wantErr {
				var ke *errs.Error
				if !errors.As(err, &ke) || ke.Code != errs.InvalidRequest {
					t.Fatalf("want invalid_request, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != "queued" || a.NotificationID == "" || !strings.HasPrefix(a.Group, "g_") {
				t.Fatalf("accepted = %+v", a)
			}
			var got *Notification
			for _, n := range h.list("") {
				if n.ID == a.NotificationID {
					got = &n
				}
			}
			if got == nil {
				t.Fatal("notification not listed")
			}
			if got.WorkflowName != tc.workflow || got.Node != tc.node || got.ExecutionID != tc.exec ||
				got.Status != StatusPending || got.Kind != KindWorkflowFailed || got.Count != 1 {
				t.Fatalf("stored %+v", got)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	cfg := testConfig()
	cfg.Owners = append(cfg.Owners,
		OwnerRule{Workflow: "q1w2*", Owner: "S0QUEUE", Channel: "C0QUEUE"},       // by id
		OwnerRule{Workflow: "billing-*", Owner: "Ana.Lima@example.com"},          // e-mail, no channel: DM
		OwnerRule{Workflow: "orders-main", Owner: "U0NEVER", Channel: "C0NEVER"}, // shadowed: first match wins
	)
	slack := slacktest.New(t)
	slack.AddUser("ana.lima@example.com", "U0ANA")
	h := newHarness(t, slack, cfg)

	cases := []struct {
		name, body, owner, channel, mention string
	}{
		{"glob on the name", fixture(t, "error-trigger-http-node.json"), "U0ORDERS", "C0ORDERS", "<@U0ORDERS>"},
		{"glob on the id, user group", strings.Replace(fixture(t, "error-trigger-trigger-node.json"), "orders-from-queue", "queue-reader", 1), "S0QUEUE", "C0QUEUE", "<!subteam^S0QUEUE>"},
		{"e-mail owner resolved via Slack", failureBody("billing-run", "Charge", "declined", "1"), "Ana.Lima@example.com", "C0ALERTS", "<@U0ANA>"},
		{"e-mail owner, second failure uses the cache", failureBody("billing-run", "Refund", "declined", "2"), "Ana.Lima@example.com", "C0ALERTS", "<@U0ANA>"},
		{"nothing matches: defaults", failureBody("misc", "Set", "bad", "3"), "U0ONCALL", "C0ALERTS", "<@U0ONCALL>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(slack.Delivered("chat.postMessage"))
			a := h.intake(tc.body)
			if a.Owner != tc.owner {
				t.Fatalf("owner %q, want %q", a.Owner, tc.owner)
			}
			h.pass()
			posts := slack.Delivered("chat.postMessage")
			if len(posts) != before+1 {
				t.Fatalf("posts %d, want %d", len(posts), before+1)
			}
			p := posts[len(posts)-1]
			if p.Channel != tc.channel {
				t.Fatalf("channel %q, want %q", p.Channel, tc.channel)
			}
			if !strings.Contains(p.Text, tc.mention) || !strings.Contains(p.Blocks, tc.mention) {
				t.Fatalf("mention %q missing:\n%s\n%s", tc.mention, p.Text, p.Blocks)
			}
			if strings.Contains(strings.ToLower(p.Raw), "ana.lima") || strings.Contains(strings.ToLower(p.Raw), "example.com") {
				t.Fatal("the owner's e-mail reached the message")
			}
		})
	}
	lookups := 0
	for _, c := range slack.Calls() {
		if c.Method == "users.lookupByEmail" {
			lookups++
		}
	}
	if lookups != 1 {
		t.Fatalf("users.lookupByEmail called %d times, want 1 (cached)", lookups)
	}
	// The cache survives a restart.
	h.restart()
	h.intake(failureBody("billing-run", "Charge", "declined again", "4"))
	h.pass()
	for _, c := range slack.Calls() {
		if c.Method == "users.lookupByEmail" {
			lookups--
		}
	}
	if lookups != 0 {
		t.Fatal("the e-mail was looked up again after a restart")
	}
}

func TestNoChannelMeansDirectMessage(t *testing.T) {
	cfg := Config{Owners: []OwnerRule{{Workflow: "billing-*", Owner: "ana@example.com"}}}
	slack := slacktest.New(t)
	slack.AddUser("ana@example.com", "U0ANA")
	h := newHarness(t, slack, cfg)
	h.intake(failureBody("billing-run", "Charge", "declined", "1"))
	h.intake(failureBody("misc", "Set", "nobody routes this", "2"))
	h.pass()
	posts := slack.Delivered("chat.postMessage")
	if len(posts) != 1 || posts[0].Channel != "U0ANA" {
		t.Fatalf("posts %+v", posts)
	}
	dead := h.list(StatusDead)
	if len(dead) != 1 || !strings.Contains(dead[0].LastFailure, "no channel") {
		t.Fatalf("a notification with no channel must be dead with a clear reason: %+v", dead)
	}
}

func TestMessageContent(t *testing.T) {
	slack := slacktest.New(t)
	h := newHarness(t, slack, testConfig())
	h.intake(fixture(t, "error-trigger-http-node.json")) // at 10:00 UTC, deadline 4h
	h.pass()
	posts := slack.Delivered("chat.postMessage")
	if len(posts) != 1 {
		t.Fatalf("posts %d", len(posts))
	}
	p := posts[0]
	for _, want := range []string{
		"orders-main", "POST to Go", "The service was not able to process your request", "webhook",
		"NodeApiError", "HTTP 500", "<@U0ORDERS>", "Check the CRM for the order, then re-run the execution.",
		"by <!date^1796047200^{time}|14:00 UTC>", `"url":"http://localhost:5678/workflow/MainWfOrders0001/executions/3"`, `"type":"button"`,
		`"type":"header"`,
	} {
		if !strings.Contains(p.Blocks, want) {
			t.Errorf("blocks lack %q", want)
		}
	}
	for _, want := range []string{"orders-main", "POST to Go", "<@U0ORDERS>", "by <!date^1796047200^{time}|14:00 UTC>"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("fallback text lacks %q: %s", want, p.Text)
		}
	}
	if p.Channel != "C0ORDERS" {
		t.Errorf("channel %s", p.Channel)
	}
}

func TestRetryOfShown(t *testing.T) {
	slack := slacktest.New(t)
	h := newHarness(t, slack, testConfig())
	h.intake(`{"execution":{"id":"12","retryOf":"11","mode":"retry","lastNodeExecuted":"A","error":{"message":"m"}},"workflow":{"name":"w"}}`)
	h.pass()
	if b := slack.Delivered("")[0].Blocks; !strings.Contains(b, "12 (retry of 11)") || !strings.Contains(b, "retry") {
		t.Fatalf("retry-of missing: %s", b)
	}
}

func TestConfigRejectsBadOwners(t *testing.T) {
	for _, cfg := range []Config{
		{DefaultOwner: "#oncall"},
		{Owners: []OwnerRule{{Workflow: "[", Owner: "U1X"}}},
		{Owners: []OwnerRule{{Workflow: "x", Owner: "bob"}}},
		{Namespaces: map[string]Route{"n": {Owner: "@bob"}}},
	} {
		if _, err := cfg.Check(); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// The wire shapes are the contract's: exactly these keys, and never a
// top-level "error" (n8n's Retry On Fail would re-send the request).
func TestWireShapes(t *testing.T) {
	keys := func(v any) string {
		b, _ := json.Marshal(v)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	if got := keys(Notification{}); got != "attempts,channel,count,created_at,delivered_at,execution_id,group,id,kind,last_failure,node,owner,status,workflow_id,workflow_name" {
		t.Errorf("list item keys: %s", got)
	}
	if got := keys(Accepted{}); got != "group,notification_id,owner,status" {
		t.Errorf("accepted keys: %s", got)
	}
	if got := keys(Page{}); got != "items,next_cursor" {
		t.Errorf("page keys: %s", got)
	}
}

// An owner e-mail Slack does not know: the message still goes out, without
// a mention and without the e-mail; the lookup is not repeated.
func TestUnknownOwnerEmail(t *testing.T) {
	cfg := testConfig()
	cfg.Owners = []OwnerRule{{Workflow: "billing-*", Owner: "gone@example.com"}}
	slack := slacktest.New(t)
	h := newHarness(t, slack, cfg)
	h.intake(failureBody("billing-run", "Charge", "declined", "1"))
	h.intake(failureBody("billing-run", "Refund", "declined", "2"))
	h.pass()
	posts := slack.Delivered("chat.postMessage")
	if len(posts) != 2 || !strings.Contains(posts[0].Text, "owner not found in Slack") || strings.Contains(posts[0].Raw, "gone") {
		t.Fatalf("posts %+v", posts)
	}
	lookups := 0
	for _, c := range slack.Calls() {
		if c.Method == "users.lookupByEmail" {
			lookups++
		}
	}
	if lookups != 1 || h.logs.Matching("not a Slack user") != 1 {
		t.Fatalf("lookups %d, logs %v", lookups, h.logs.Lines())
	}
}
