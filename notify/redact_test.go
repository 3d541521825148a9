package notify_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"

	bolt "go.etcd.io/bbolt"
)

// secretsOf collects what must never reach Slack from a fixture: every
// string under error.context (request bodies, headers), under
// error.node.parameters, error.messages (response bodies), and every
// stack frame.
func secretsOf(t *testing.T, body string) []string {
	t.Helper()
	var item map[string]any
	if err := json.Unmarshal([]byte(body), &item); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if len(x) >= 4 && x != "json" && x != "POST" && x != "none" && x != "keypair" {
				out = append(out, x)
			}
		case map[string]any:
			for k, v := range x {
				if k == "method" { // "POST" is not a secret
					continue
				}
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	for _, variant := range []string{"execution", "trigger"} {
		v, _ := item[variant].(map[string]any)
		e, _ := v["error"].(map[string]any)
		if e == nil {
			continue
		}
		walk(e["context"])
		walk(e["messages"])
		if n, ok := e["node"].(map[string]any); ok {
			walk(n["parameters"])
		}
		for _, s := range []any{e["stack"], mapGet(e["cause"], "stack")} {
			if st, ok := s.(string); ok {
				for _, line := range strings.Split(st, "\n")[1:] {
					if line = strings.TrimSpace(line); line != "" {
						out = append(out, line)
					}
				}
			}
		}
	}
	return out
}

func mapGet(v any, k string) any {
	m, _ := v.(map[string]any)
	return m[k]
}

func TestRedaction(t *testing.T) {
	crafted := `{"execution":{"id":"77","url":"https://admin:hunter2pass@n8n.example.org/workflow/W9/executions/77?token=abc123secret",
	 "lastNodeExecuted":"Send mail to jane.doe@example.com",
	 "error":{"message":"Request for jane.doe@example.com failed: Authorization: Bearer sk-live-abcdefghijklmnop1234; api_key=AKIAIOSFODNN7EXAMPLE; token xoxb-1234-5678-abcdefgh",
	  "description":"password=Tr0ub4dor&3 and key eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	  "stack":"Error: x\n    at secretFrame (/srv/app/secret.js:1:1)",
	  "context":{"request":{"headers":{"authorization":"Basic dXNlcjpzM2NyZXQ="},"body":{"email":"john@example.net","card":"4111111111111111"}}},
	  "node":{"name":"Send mail","parameters":{"apiKey":"PARAMSECRET123456","toEmail":"paramuser@example.com"}}},
	 "mode":"webhook"},
	 "workflow":{"id":"W9","name":"mailer for ops@example.com"}}`
	bodies := map[string]string{
		"http node":    fixture(t, "error-trigger-http-node.json"),
		"code node":    fixture(t, "error-trigger-code-node.json"),
		"trigger node": fixture(t, "error-trigger-trigger-node.json"),
		"crafted":      crafted,
	}
	forbidden := []string{
		// crafted: e-mails, tokens, keys, passwords, URL credentials, query tokens
		"jane.doe", "example.com", "example.net", "sk-live-abcdefghijklmnop1234", "AKIAIOSFODNN7EXAMPLE",
		"xoxb-1234", "Tr0ub4dor", "eyJhbGciOiJIUzI1NiJ9", "hunter2pass", "abc123secret", "dXNlcjpzM2NyZXQ=",
		"4111111111111111", "PARAMSECRET123456", "secretFrame",
		// fixtures: header and body values, parameters, response bodies, stack frames
		"idempotency-key", "application/json,text/html", "fail500", "E_TARGET", "VmCodeWrapper",
		"JsTaskRunner", "HttpRequestV3.node.ts", "127.0.0.1:9999", "jsonBody",
	}
	for _, b := range bodies {
		forbidden = append(forbidden, secretsOf(t, b)...)
	}

	slack := slacktest.New(t)
	h := newHarness(t, slack, testConfig())
	for name, b := range bodies {
		h.clock.Advance(DefaultGroupWindow)
		if _, err := h.svc.Intake(t.Context(), []byte(b)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	h.pass()
	if n := len(slack.Delivered("chat.postMessage")); n != len(bodies) {
		t.Fatalf("delivered %d of %d", n, len(bodies))
	}

	// What reached Slack, as sent and decoded.
	var sent strings.Builder
	for _, c := range slack.Calls() {
		dec, _ := url.QueryUnescape(c.Raw)
		sent.WriteString(c.Raw + "\n" + dec + "\n" + c.Blocks + "\n" + c.Text + "\n")
	}
	// What is stored: every value in the notify buckets.
	var stored strings.Builder
	if err := h.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if !strings.HasPrefix(string(name), "notify/") || string(name) == "notify/users" {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				stored.Write(k)
				stored.Write(v)
				return nil
			})
		})
	}); err != nil {
		t.Fatal(err)
	}
	for _, secret := range forbidden {
		if strings.Contains(sent.String(), secret) {
			t.Errorf("reached Slack: %q", secret)
		}
		if strings.Contains(stored.String(), secret) {
			t.Errorf("stored in the outbox: %q", secret)
		}
	}
	// What is kept is still useful.
	for _, want := range []string{"The service was not able to process your request", "C3 [line 1]",
		"There was a problem with the trigger node", "[email]", "n8n.example.org/workflow/W9/executions/77"} {
		if !strings.Contains(sent.String(), want) {
			t.Errorf("lost useful text %q", want)
		}
	}
}
