package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// fakeN8nAPI answers n8n's public API as n8n does for what the guard's
// Slack buttons ask: an execution's workflowId, a workflow's name, a
// retry; it records every call ("METHOD path").
type fakeN8nAPI struct {
	mu        sync.Mutex
	calls     []string
	execs     map[string]string // execution id -> workflow id
	workflows map[string]string // workflow id -> name
}

func (f *fakeN8nAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("X-N8N-API-KEY") != "n8n-api-key" {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]any{"message": "unauthorized"})
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v1")
	if id, ok := strings.CutSuffix(strings.TrimPrefix(path, "/executions/"), "/retry"); ok && r.Method == http.MethodPost {
		json.NewEncoder(w).Encode(map[string]any{"id": "9" + id, "mode": "retry", "status": "running", "workflowId": f.execs[id]})
		return
	}
	if id, ok := strings.CutPrefix(path, "/executions/"); ok && f.execs[id] != "" {
		json.NewEncoder(w).Encode(map[string]any{"id": id, "workflowId": f.execs[id], "status": "error", "finished": false})
		return
	}
	if id, ok := strings.CutPrefix(path, "/workflows/"); ok && f.workflows[id] != "" {
		json.NewEncoder(w).Encode(map[string]any{"id": id, "name": f.workflows[id]})
		return
	}
	w.WriteHeader(http.StatusNotFound)
	json.NewEncoder(w).Encode(map[string]any{"message": "Not Found"})
}

func (f *fakeN8nAPI) retries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, "POST ") && strings.HasSuffix(c, "/retry") {
			out = append(out, c)
		}
	}
	return out
}

// The attack of issue 44, replayed over loopback: a reserve token of
// crm-contacts posts a forged failure that names the payments workflow's
// id and its execution 421, under a workflow name routed to the crm
// person, who presses "Retry execution". The guard asks n8n whose
// execution 421 is, offers no button, and refuses the click: the payments
// key is not allowed a re-run, and n8n is asked to retry nothing. Without
// a re-run gate the same click would have made n8n retry payments'
// execution directly. Mutations: executionMismatch answering "" (notify/
// execcheck.go) fails "no gate" (n8n retries 421) and shows the button;
// the gate's namespace rule (notify/rerun.go mayDecideAll) is the second
// lock of "at the gate", tested alone in notify.
func TestSlackRetryOfAForgedFailureChangesNothing(t *testing.T) {
	for _, gate := range []bool{true, false} {
		name := map[bool]string{true: "at the gate", false: "no gate"}[gate]
		t.Run(name, func(t *testing.T) {
			const secret = "rerun-signing-secret"
			slack := slacktest.New(t)
			n8n := &fakeN8nAPI{execs: map[string]string{"421": "wf-pay"}, workflows: map[string]string{"wf-pay": "payments-charge", "wf-crm": "crm-sync"}}
			ns := httptest.NewServer(n8n)
			defer ns.Close()
			fc := writeConfig(t, `
namespaces:
  crm-contacts:
    owner: U0CRM
    channel: C0CRM
  payments:
    owner: U0PAY
    channel: C0PAY
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
owners:
  - workflow: "crm-*"
    owner: U0CRM
    channel: C0CRM
  - workflow: "payments-*"
    owner: U0PAY
    channel: C0PAY
tokens:
  team-crm:
    env: TEAM_CRM_TOKEN
    role: reserve
    namespaces: [crm-contacts]
`)
			scoped, err := fc.ScopedTokens(env(map[string]string{"TEAM_CRM_TOKEN": "team-crm-secret"}))
			if err != nil {
				t.Fatal(err)
			}
			m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"tok"}, File: fc, ScopedTokens: scoped,
				SlackBotToken: "xoxb-test", SlackAPIURL: slack.APIURL(), SlackSigningSecret: secret,
				N8nAPIURL: ns.URL + "/api/v1", N8nAPIKey: "n8n-api-key"}, nil)
			if err := m.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			base := "http://" + m.Addr()

			// Payments' own execution 421 wrote pay-1, failed, and (gate)
			// was retried in n8n to stop at its re-run gate.
			const holder = "n8n wf-pay exec 421"
			_, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "payments", "key": "pay-1", "owner": holder})
			if st, f := call(t, base, "tok", http.MethodPost, "/v1/fail", map[string]any{"namespace": "payments", "key": "pay-1", "token": a["token"], "reason": "destination_failed"}); st != http.StatusOK {
				t.Fatalf("fail: %d %v", st, f)
			}
			if gate {
				if st, g := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "payments", "key": "pay-1", "owner": holder, "rerun": true}); st != http.StatusConflict || g["code"] != "rerun_not_granted" {
					t.Fatalf("the gate: %d %v", st, g)
				}
			}

			// The forgery, with team-crm's token.
			if st, f := call(t, base, "team-crm-secret", http.MethodPost, "/v1/n8n/error", map[string]any{
				"execution": map[string]any{"id": "421", "lastNodeExecuted": "POST to CRM", "error": map[string]any{"message": "boom"}},
				"workflow":  map[string]any{"id": "wf-pay", "name": "crm-sync"}}); st/100 != 2 {
				t.Fatalf("the forged failure: %d %v", st, f)
			}
			var id string
			testwait.For(t, "the failure's message", func() bool {
				_, page := call(t, base, "tok", http.MethodGet, "/v1/notifications?state=delivered", nil)
				for _, it := range page["items"].([]any) {
					if n := it.(map[string]any); n["kind"] == "workflow_failed" {
						id = n["id"].(string)
					}
				}
				return id != ""
			})
			if post := slack.Last("chat.postMessage"); post.Channel != "C0CRM" || strings.Contains(post.Content(), "guard_rerun") {
				t.Errorf("the forged failure's message offers Retry execution, or went elsewhere: %s %.300s", post.Channel, post.Content())
			}

			// The crm person presses Retry execution all the same.
			h, b := signedClick(secret, time.Now(), "U0CRM", "guard_rerun", id)
			if status, body, _ := postSigned(t, base, h, b); status != http.StatusOK {
				t.Fatalf("click: %d %s", status, body)
			}
			testwait.For(t, "the click carried out", func() bool {
				return len(slack.CallsOf("chat.postEphemeral", "")) == 1 || len(slack.CallsOf("chat.update", "")) > 0 || len(n8n.retries()) > 0
			})
			if said := slack.Last("chat.postEphemeral").Content(); !strings.Contains(said, "Refused") || !strings.Contains(said, "nothing changed") {
				t.Errorf("the crm person was told %q", said)
			}
			_, rec := call(t, base, "tok", http.MethodGet, "/v1/lookup?namespace=payments&key=pay-1", nil)
			for _, h := range rec["history"].([]any) {
				if ev := h.(map[string]any); ev["event"] == "rerun_granted" {
					t.Fatalf("the crm person allowed payments' re-run: %v", ev)
				}
			}
			if got := n8n.retries(); len(got) != 0 {
				t.Fatalf("n8n was asked to retry: %v", got)
			}
		})
	}
}
