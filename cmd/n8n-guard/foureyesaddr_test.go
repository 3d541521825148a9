package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// issueSpellings are the requester spellings of issue 44 that Ana
// approved herself with, through the API and in Slack, before four eyes
// read addresses as addresses.
var issueSpellings = []string{"Ana Lopez <ana@example.com>", "mailto:ana@example.com", "ana+x@example.com", "ana@example.com.",
	"aná@example.com", "Ana\u2010Lopez"}

// Four eyes reads addresses as addresses at the API's door and at
// Slack's, against the binary over loopback: Ana (ana@example.com,
// Ana-Lopez, Slack U0ANA under people:) may not approve a request
// recorded with any of the six spellings, neither with her named token
// nor with her Slack user; each refusal says why and changes nothing. Bob
// approves. The console's door: api/console
// TestConsoleFourEyesReadsAddressesAsAddresses. Mutations: the address
// forms left out of keystore's forms (address.go), the skeleton
// comparison left out (person.go).
func TestFourEyesReadsAddressesAtTheAPIAndInSlack(t *testing.T) {
	const secret = "four-eyes-address-secret"
	slack := slacktest.New(t)
	fc := writeConfig(t, `
namespaces:
  invoices:
    channel: C0FIN
    approval: required
    approvers: [U0ANA, U0BOB]
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
people:
  ana:
    emails: [ana@example.com]
    names: [Ana-Lopez]
    slack: [U0ANA]
  bob:
    emails: [bob@example.com]
    slack: [U0BOB]
tokens:
  ops-ana:
    env: ANA_TOKEN
    role: decide
    person: ana@example.com
`)
	scoped, err := fc.ScopedTokens(env(map[string]string{"ANA_TOKEN": "ana-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(Config{
		Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"tok"}, File: fc, ScopedTokens: scoped,
		SlackBotToken: "xoxb-test", SlackAPIURL: slack.APIURL(), SlackSigningSecret: secret,
		ResumeOrigins: []string{"http://n8n.local"},
	}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()

	request := func(key, who string) {
		t.Helper()
		status, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "invoices", "key": key,
			"resume_url": "http://n8n.local/webhook-waiting/" + key, "owner": "n8n execution " + key, "fingerprint": key, "requested_by": who})
		if status != http.StatusOK || a["outcome"] != "parked" {
			t.Fatalf("reserve %s by %q: %d %v", key, who, status, a)
		}
	}
	reason := func(key string) any {
		_, k := call(t, base, "tok", http.MethodGet, "/v1/lookup?namespace=invoices&key="+key, nil)
		return k["reason"]
	}
	// messageOf is the id of key's approval message.
	messageOf := func(key string) string {
		t.Helper()
		var id string
		testwait.For(t, "the approval message of "+key, func() bool {
			_, page := call(t, base, "tok", http.MethodGet, "/v1/notifications?state=delivered", nil)
			for _, it := range page["items"].([]any) {
				if n := it.(map[string]any); n["kind"] == "approval" && n["key"] == key {
					id = n["id"].(string)
				}
			}
			return id != ""
		})
		return id
	}
	clickApprove := func(user, name, id, key string) string {
		t.Helper()
		before := len(slack.CallsOf("chat.postEphemeral", ""))
		payload, _ := json.Marshal(map[string]any{
			"type": "block_actions", "user": map[string]any{"id": user, "name": name},
			"channel": map[string]any{"id": "C0FIN"},
			"actions": []any{map[string]any{"type": "button", "block_id": "decide", "action_id": "guard_approve", "value": id}},
		})
		body := []byte("payload=" + url.QueryEscape(string(payload)))
		if status, answer, _ := postSigned(t, base, slacktest.Sign(secret, time.Now(), body), body); status != http.StatusOK {
			t.Fatalf("click: %d %s", status, answer)
		}
		var said string
		testwait.For(t, "the answer to "+user, func() bool {
			if len(slack.CallsOf("chat.postEphemeral", "")) > before {
				said = slack.Last("chat.postEphemeral").Content()
				return true
			}
			return reason(key) == "approved"
		})
		return said
	}

	for i, who := range issueSpellings {
		t.Run(who, func(t *testing.T) {
			key := "inv-" + strconv.Itoa(i)
			request(key, who)
			// The API, with her named token.
			status, p := call(t, base, "ana-secret", http.MethodPost, "/v1/approve", map[string]any{"namespace": "invoices", "key": key})
			if msg, _ := p["detail"].(string); status != http.StatusForbidden || p["code"] != "forbidden" || p["error"] != nil ||
				!strings.Contains(msg+" "+stringOf(p["title"]), "four eyes") || !strings.Contains(msg+" "+stringOf(p["title"]), "requester") {
				t.Fatalf("ana's token approving %q: %d %v", who, status, p)
			}
			if reason(key) != "awaiting_approval" {
				t.Fatalf("a refused approval changed %s: %v", key, reason(key))
			}
			// Slack, as her Slack user.
			said := clickApprove("U0ANA", "ana", messageOf(key), key)
			if reason(key) != "awaiting_approval" || !strings.Contains(said, "four eyes") || !strings.Contains(said, "requester") {
				t.Fatalf("ana's Slack user approving %q: %v, told %q", who, reason(key), said)
			}
		})
	}
	request("inv-bob", "Bob <bob@example.com>")
	if status, p := call(t, base, "ana-secret", http.MethodPost, "/v1/approve", map[string]any{"namespace": "invoices", "key": "inv-bob"}); status != http.StatusOK {
		t.Fatalf("ana approving bob's request: %d %v", status, p)
	}
}

func stringOf(v any) string { s, _ := v.(string); return s }
