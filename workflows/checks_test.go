package workflows

import (
	"encoding/json"
	"strings"
	"testing"
)

// The shipped check and the check template: a webhook only the guard may
// call (the check credential, never the resume credential), searches that
// only read, an answer of found or absent; and setup's repointing of the
// API token and resume credentials leaves the webhook's credential alone.
func TestChecksShape(t *testing.T) {
	for _, name := range []string{"lead-check.json", "templates/check.json"} {
		b, err := shipped.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var wf Workflow
		if err := json.Unmarshal(b, &wf); err != nil {
			t.Fatal(err)
		}
		var webhook, respond, searches int
		for _, n := range wf.Nodes {
			params, _ := n["parameters"].(map[string]any)
			switch n["type"] {
			case "n8n-nodes-base.webhook":
				webhook++
				if id, _ := CheckCredentialOf(n); id != CheckCredentialID || params["authentication"] != "headerAuth" || params["responseMode"] != "responseNode" {
					t.Errorf("%s: the webhook is not guarded by the check credential or does not answer from a node: %v", name, n)
				}
			case "n8n-nodes-base.httpRequest":
				searches++
				if params["method"] != "GET" {
					t.Errorf("%s: %v sends %v: a check never writes to the target", name, n["name"], params["method"])
				}
			case "n8n-nodes-base.respondToWebhook":
				respond++
			case "n8n-nodes-base.code":
				code, _ := params["jsCode"].(string)
				if !strings.Contains(code, "result: 'found', reference:") || !strings.Contains(code, "result: 'absent'") {
					t.Errorf("%s: %v does not answer found with a reference or absent", name, n["name"])
				}
			}
		}
		if webhook != 1 || respond != 1 || searches != 1 {
			t.Errorf("%s: %d webhooks, %d answers, %d searches; want one each", name, webhook, respond, searches)
		}
		PointCredential(wf.Nodes, "other", "other")
		PointResumeCredential(wf.Nodes, "resume-made-by-n8n", ResumeCredentialName)
		for _, n := range wf.Nodes {
			if n["type"] == "n8n-nodes-base.webhook" {
				if id, _ := CheckCredentialOf(n); id != CheckCredentialID {
					t.Errorf("%s: repointing the API token or resume credential moved the check's webhook to %q", name, id)
				}
			}
		}
		// n8n setup creates the check credential under an id of n8n's:
		// the check's webhook must be wired to it.
		PointCheckCredential(wf.Nodes, "check-made-by-n8n", CheckCredentialName)
		for _, n := range wf.Nodes {
			if n["type"] == "n8n-nodes-base.webhook" {
				creds, _ := n["credentials"].(map[string]any)
				if c, _ := creds[CredentialType].(map[string]any); c["id"] != "check-made-by-n8n" {
					t.Errorf("%s: PointCheckCredential left the check's webhook on %v", name, c["id"])
				}
			}
		}
	}
}

// A check made before checks had a secret of their own checks a resume
// credential (the shipped placeholder, or the instance's): setup moves it
// to the check credential; a webhook guarded by anything else is left
// alone.
func TestOlderChecksMoveToTheCheckCredential(t *testing.T) {
	webhook := func(id string) map[string]any {
		return map[string]any{"type": "n8n-nodes-base.webhook", "parameters": map[string]any{"authentication": "headerAuth"},
			"credentials": map[string]any{CredentialType: map[string]any{"id": id, "name": "x"}}}
	}
	for _, tc := range []struct {
		from  string
		moved bool
	}{
		{ResumeCredentialID, true},
		{"resume-of-this-n8n", true},
		{CheckCredentialID, true},
		{"someone-elses", false},
	} {
		nodes := []map[string]any{webhook(tc.from)}
		PointCheckCredential(nodes, "check-1", CheckCredentialName, "resume-of-this-n8n")
		got := nodes[0]["credentials"].(map[string]any)[CredentialType].(map[string]any)["id"]
		if (got == "check-1") != tc.moved {
			t.Errorf("a webhook on %s: now on %v, moved want %v", tc.from, got, tc.moved)
		}
	}
}
