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

// Four eyes in Slack, against the binary over loopback with the
// configuration file's people: a click is compared with the requester as
// the Slack user (its ID and name) and as the person people: says it is.
// Mutations tried: the Slack user's name left out of the identities
// (notify/approval.go): the spellings of "ana-lopez" are approved; the
// person comparison left out (keystore/person.go): the request by her
// e-mail is approved by her Slack user; an unknown decider allowed: eve
// approves.
func TestSlackFourEyesComparesPersons(t *testing.T) {
	const secret = "four-eyes-signing-secret"
	slack := slacktest.New(t)
	m := NewMain(Config{
		Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"tok"},
		SlackBotToken: "xoxb-test", SlackAPIURL: slack.APIURL(), SlackSigningSecret: secret,
		ResumeOrigins: []string{"http://n8n.local"},
		File: writeConfig(t, `
namespaces:
  invoices:
    channel: C0FIN
    approval: required
    approvers: [U0ANA, U0BOB, U0EVE]
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
people:
  ana:
    emails: [ana@example.com]
    slack: [U0ANA]
  bob:
    slack: [U0BOB]
`),
	}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()

	seen := map[string]bool{}
	keyOf := map[string]string{} // the key each approval message is about
	// request asks approval of key for requestedBy and returns its
	// message's id; or the refusal's problem.
	request := func(key, requestedBy string) (string, map[string]any) {
		t.Helper()
		status, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "invoices", "key": key,
			"resume_url": "http://n8n.local/webhook-waiting/" + key, "owner": "n8n exec " + key, "fingerprint": key, "requested_by": requestedBy})
		if status != http.StatusOK {
			return "", a
		}
		if a["outcome"] != "parked" {
			t.Fatalf("reserve %s: %v", key, a)
		}
		var id string
		testwait.For(t, "the approval message of "+key, func() bool {
			_, page := call(t, base, "tok", http.MethodGet, "/v1/notifications?state=delivered", nil)
			for _, it := range page["items"].([]any) {
				n := it.(map[string]any)
				if n["kind"] == "approval" && !seen[n["id"].(string)] {
					id = n["id"].(string)
				}
			}
			return id != ""
		})
		seen[id] = true
		return id, nil
	}
	// approve clicks Approve as the Slack user (id, name) and returns
	// what Slack showed them alone.
	approve := func(user, name, id string) string {
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
			_, k := call(t, base, "tok", http.MethodGet, "/v1/lookup?namespace=invoices&key="+url.QueryEscape(keyOf[id]), nil)
			return k["reason"] == "approved"
		})
		return said
	}
	reason := func(key string) any {
		_, k := call(t, base, "tok", http.MethodGet, "/v1/lookup?namespace=invoices&key="+key, nil)
		return k["reason"]
	}

	for i, tc := range []struct{ name, spelling, rule string }{
		{"a leading space", " ana-lopez", ""},
		{"a trailing zero-width space", "ana-lopez\u200b", "no_format"},
		{"a trailing no-break space", "ana-lopez\u00a0", ""},
		{"a Cyrillic a", "\u0430na-lopez", "one_script"},
		{"a Unicode hyphen", "ana\u2010lopez", ""},
		{"fullwidth letters", "\uff21\uff2e\uff21-lopez", ""},
		{"her e-mail, through people:", "ana@example.com", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "inv-" + strconv.Itoa(i)
			id, refused := request(key, tc.spelling)
			if tc.rule != "" {
				fields, _ := json.Marshal(refused["fields"])
				if refused["code"] != "invalid_request" || !strings.Contains(string(fields), `"rule":"`+tc.rule+`"`) || refused["error"] != nil {
					t.Fatalf("reserve: %v, want invalid_request, rule %s", refused, tc.rule)
				}
				return
			}
			keyOf[id] = key
			said := approve("U0ANA", "ana-lopez", id)
			if reason(key) != "awaiting_approval" || !strings.Contains(said, "four eyes") || !strings.Contains(said, "triggered this event") {
				t.Fatalf("ana's Slack user approving %q: %v, told %q", tc.spelling, reason(key), said)
			}
		})
	}

	id, _ := request("inv-eve", "ana@example.com")
	keyOf[id] = "inv-eve"
	if said := approve("U0EVE", "eve", id); reason("inv-eve") != "awaiting_approval" || !strings.Contains(said, "people:") {
		t.Fatalf("a Slack user people: does not know approving: %v, told %q", reason("inv-eve"), said)
	}
	approve("U0BOB", "bob", id)
	if reason("inv-eve") != "approved" {
		t.Fatalf("bob's approval: %v", reason("inv-eve"))
	}
}
