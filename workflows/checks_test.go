package workflows

import (
	"encoding/json"
	"strings"
	"testing"
)

// The shipped check and the check template: a webhook only the guard may
// call (the resume credential), searches that only read, an answer of
// found or absent; and setup's credential repointing leaves the webhook's
// credential alone.
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
				if id, _ := UsesResumeCredential(n); id != ResumeCredentialID || params["authentication"] != "headerAuth" || params["responseMode"] != "responseNode" {
					t.Errorf("%s: the webhook is not guarded by the resume credential or does not answer from a node: %v", name, n)
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
		for _, n := range wf.Nodes {
			if n["type"] == "n8n-nodes-base.webhook" {
				if id, _ := UsesResumeCredential(n); id != ResumeCredentialID {
					t.Errorf("%s: PointCredential repointed the check's webhook to %q", name, id)
				}
			}
		}
		// n8n setup creates the resume credential under an id of n8n's:
		// the check's webhook must be wired to it with the Wait nodes.
		PointResumeCredential(wf.Nodes, "made-by-n8n", "n8n-guard resume")
		for _, n := range wf.Nodes {
			if n["type"] == "n8n-nodes-base.webhook" {
				creds, _ := n["credentials"].(map[string]any)
				if c, _ := creds[CredentialType].(map[string]any); c["id"] != "made-by-n8n" {
					t.Errorf("%s: PointResumeCredential left the check's webhook on %v", name, c["id"])
				}
			}
		}
	}
}
