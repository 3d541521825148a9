package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// These checks need no n8n: they keep the promises the set-up guide makes
// about the shipped files (ids, paths, the credential, the Config node) so
// that a hand edit exported from the n8n UI cannot quietly break them. The
// behaviour itself is proven by the e2e suite (build tag e2e).

type n8nNode struct {
	Name        string                     `json:"name"`
	Type        string                     `json:"type"`
	WebhookID   string                     `json:"webhookId"`
	Parameters  map[string]any             `json:"parameters"`
	Credentials map[string]json.RawMessage `json:"credentials"`
	RetryOnFail bool                       `json:"retryOnFail"`
}

type n8nWorkflow struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Active      bool      `json:"active"`
	Nodes       []n8nNode `json:"nodes"`
	Connections map[string]struct {
		Main [][]struct {
			Node string `json:"node"`
		} `json:"main"`
	} `json:"connections"`
	Settings map[string]any `json:"settings"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// callsGuard tells the nodes that talk to n8n-guard.
func callsGuard(n n8nNode) bool {
	url, _ := n.Parameters["url"].(string)
	return n.Type == "n8n-nodes-base.httpRequest" && strings.Contains(url, ".guard_url")
}

func checkGuardNode(t *testing.T, where string, n n8nNode) {
	t.Helper()
	if n.Parameters["authentication"] != "genericCredentialType" || n.Parameters["genericAuthType"] != "httpBearerAuth" {
		t.Errorf("%s: node %q does not use Bearer Auth", where, n.Name)
	}
	var cred struct{ ID, Name string }
	_ = json.Unmarshal(n.Credentials["httpBearerAuth"], &cred)
	if cred.ID != "n8nGuardApiToken" || cred.Name != "n8n-guard API token" {
		t.Errorf("%s: node %q uses credential %+v, want id n8nGuardApiToken named %q", where, n.Name, cred, "n8n-guard API token")
	}
}

func TestShippedWorkflowShapes(t *testing.T) {
	for _, c := range []struct {
		file, id, trigger, path, webhookID, write string
		env                                       []string
	}{
		{"lead-to-crm.json", "n8nGuardLeadCrm1", "Lead webhook", "n8n-guard/lead", "4c3b1f0e-5a8d-4f6e-9b1a-2d7c8e9f0a11", "Write to CRM",
			[]string{"$env.N8N_GUARD_URL", "$env.CRM_BASE_URL"}},
		{"booking-confirmation.json", "n8nGuardBooking1", "Booking webhook", "n8n-guard/booking", "4c3b1f0e-5a8d-4f6e-9b1a-2d7c8e9f0a12", "Send confirmation",
			[]string{"$env.N8N_GUARD_URL", "$env.MAIL_API_URL"}},
		{"error-to-guard.json", "n8nGuardErrors01", "Error Trigger", "", "", "",
			[]string{"$env.N8N_GUARD_URL"}},
	} {
		t.Run(c.file, func(t *testing.T) {
			var wf n8nWorkflow
			readJSON(t, filepath.Join("..", "workflows", c.file), &wf)
			if wf.ID != c.id || wf.Active {
				t.Errorf("id %q active %v, want id %q, inactive", wf.ID, wf.Active, c.id)
			}
			if wf.Settings["executionOrder"] != "v1" {
				t.Errorf("settings.executionOrder = %v, want v1", wf.Settings["executionOrder"])
			}
			wantErrWF := "n8nGuardErrors01"
			if c.id == wantErrWF {
				wantErrWF = "" // the error workflow must not report to itself
			}
			if got, _ := wf.Settings["errorWorkflow"].(string); got != wantErrWF {
				t.Errorf("settings.errorWorkflow = %q, want %q", got, wantErrWF)
			}
			byName := map[string]n8nNode{}
			for _, n := range wf.Nodes {
				if _, dup := byName[n.Name]; dup {
					t.Errorf("two nodes named %q", n.Name)
				}
				byName[n.Name] = n
			}
			for src, out := range wf.Connections {
				if _, ok := byName[src]; !ok {
					t.Errorf("connection from missing node %q", src)
				}
				for _, targets := range out.Main {
					for _, to := range targets {
						if _, ok := byName[to.Node]; !ok {
							t.Errorf("connection %q → missing node %q", src, to.Node)
						}
					}
				}
			}
			trig, ok := byName[c.trigger]
			if !ok {
				t.Fatalf("no trigger node %q", c.trigger)
			}
			if c.path != "" && (trig.Parameters["path"] != c.path || trig.WebhookID != c.webhookID) {
				t.Errorf("webhook path %v id %q, want %s and %s", trig.Parameters["path"], trig.WebhookID, c.path, c.webhookID)
			}
			if next := wf.Connections[c.trigger].Main; len(next) == 0 || len(next[0]) != 1 || next[0][0].Node != "Config" {
				t.Errorf("the trigger is not followed by the Config node: %+v", next)
			}
			cfg, _ := json.Marshal(byName["Config"].Parameters)
			for _, v := range c.env {
				if !strings.Contains(string(cfg), v) {
					t.Errorf("Config does not default to %s", v)
				}
			}
			guarded := 0
			for _, n := range wf.Nodes {
				if callsGuard(n) {
					guarded++
					checkGuardNode(t, c.file, n)
				}
			}
			if guarded == 0 {
				t.Errorf("no node calls n8n-guard")
			}
			if c.write != "" && byName[c.write].RetryOnFail {
				t.Errorf("%q has Retry On Fail: a retry could repeat the side effect", c.write)
			}
		})
	}
}

func TestTemplateShapes(t *testing.T) {
	for _, op := range []string{"config", "reserve", "complete", "fail", "lookup", "resolve"} {
		var clip struct {
			Nodes       []n8nNode      `json:"nodes"`
			Connections map[string]any `json:"connections"`
		}
		readJSON(t, filepath.Join("..", "workflows", "templates", op+".json"), &clip)
		if len(clip.Nodes) != 1 || clip.Connections == nil {
			t.Errorf("templates/%s.json: %d nodes, want one node in clipboard form", op, len(clip.Nodes))
			continue
		}
		n := clip.Nodes[0]
		if op == "config" {
			continue
		}
		if !callsGuard(n) || !strings.HasSuffix(n.Parameters["url"].(string), "/v1/"+op) {
			t.Errorf("templates/%s.json: node %q does not call /v1/%s", op, n.Name, op)
		}
		checkGuardNode(t, "templates/"+op+".json", n)
	}
}
