package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// These checks need no n8n: they keep the promises the set-up guide makes
// about the shipped files (ids, paths, the credential, the Config node) so
// that a hand edit exported from the n8n UI cannot quietly break them. The
// behaviour itself is proven by the e2e suite (build tag e2e).

type n8nNode struct {
	Name        string                     `json:"name"`
	Notes       string                     `json:"notes"`
	NotesInFlow bool                       `json:"notesInFlow"`
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
	if n.Parameters["authentication"] != "genericCredentialType" || n.Parameters["genericAuthType"] != workflows.CredentialType {
		t.Errorf("%s: node %q does not use Header Auth", where, n.Name)
	}
	var cred struct{ ID, Name string }
	_ = json.Unmarshal(n.Credentials[workflows.CredentialType], &cred)
	if cred.ID != workflows.CredentialID || cred.Name != workflows.CredentialName {
		t.Errorf("%s: node %q uses credential %+v, want id %s named %q", where, n.Name, cred, workflows.CredentialID, workflows.CredentialName)
	}
	if url, _ := n.Parameters["url"].(string); strings.HasSuffix(url, "/v1/reserve") {
		body, _ := n.Parameters["jsonBody"].(string)
		if !strings.Contains(body, "request_id: ($execution.id + ':' + $nodeId") {
			t.Errorf("%s: node %q reserves without request_id = execution id + node id", where, n.Name)
		}
	}
}

// checkConfig: the Config node is the one place with addresses, plain
// values (no expression, so nothing reads $env), marked for the user.
func checkConfig(t *testing.T, where string, n n8nNode, names []string) {
	t.Helper()
	nodes := []map[string]any{{"name": n.Name, "parameters": n.Parameters}}
	for _, name := range names {
		v, ok := workflows.ConfigValue(nodes, name)
		s, _ := v.(string)
		if !ok || !strings.HasPrefix(s, "http") {
			t.Errorf("%s: Config value %s = %v, want a plain URL to edit", where, name, v)
		}
	}
	if !strings.HasPrefix(n.Notes, "EDIT HERE") || !n.NotesInFlow {
		t.Errorf("%s: the Config node is not marked as the place to edit (notes %q shown %v)", where, n.Notes, n.NotesInFlow)
	}
}

// TestNothingReadsEnv: n8n 2.x blocks $env in expressions by default, and
// a token belongs in a credential; no shipped file may use either.
func TestNothingReadsEnv(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../workflows/*.json", "../workflows/templates/*.json", "../n8n-nodes/examples/*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found %d shipped files, want the workflows, templates and examples", len(files))
	}
	for _, f := range files {
		if strings.Contains(f, "env") {
			continue // a clearly named env-based variant may read $env
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "$env") {
			t.Errorf("%s reads $env", f)
		}
		if strings.HasPrefix(strings.TrimSpace(string(b)), "[") {
			continue // a credentials export (n8n import:credentials), not a workflow
		}
		var wf struct {
			ID    string    `json:"id"`
			Nodes []n8nNode `json:"nodes"`
		}
		if err := json.Unmarshal(b, &wf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.Contains(f, "templates") && wf.ID == "" {
			t.Errorf("%s has no id: n8n 2.x refuses to import it", f)
		}
	}
}

func TestShippedWorkflowShapes(t *testing.T) {
	for _, c := range []struct {
		file, id, trigger, path, webhookID, write string
		addresses                                 []string
	}{
		{"lead-to-crm.json", "n8nGuardLeadCrm1", "Lead webhook", "n8n-guard/lead", "4c3b1f0e-5a8d-4f6e-9b1a-2d7c8e9f0a11", "Write to CRM",
			[]string{"guard_url", "crm_base_url"}},
		{"booking-confirmation.json", "n8nGuardBooking1", "Booking webhook", "n8n-guard/booking", "4c3b1f0e-5a8d-4f6e-9b1a-2d7c8e9f0a12", "Send confirmation",
			[]string{"guard_url", "mail_api_url"}},
		{"error-to-guard.json", "n8nGuardErrors01", "Error Trigger", "", "", "",
			[]string{"guard_url"}},
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
			checkConfig(t, c.file, byName["Config"], c.addresses)
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
	for _, op := range []string{"config", "reserve", "reserve-park", "complete", "fail", "lookup", "resolve"} {
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
			checkConfig(t, "templates/config.json", n, []string{"guard_url"})
			continue
		}
		if op == "reserve-park" {
			op = "reserve"
			if body, _ := n.Parameters["jsonBody"].(string); !strings.Contains(body, "resume_url: $execution.resumeUrl") {
				t.Errorf("templates/reserve-park.json does not send the execution's resume URL")
			}
		}
		if !callsGuard(n) || !strings.HasSuffix(n.Parameters["url"].(string), "/v1/"+op) {
			t.Errorf("templates/%s.json: node %q does not call /v1/%s", op, n.Name, op)
		}
		checkGuardNode(t, "templates/"+op+".json", n)
	}
	var wait struct{ Nodes []n8nNode }
	readJSON(t, filepath.Join("..", "workflows", "templates", "wait.json"), &wait)
	if len(wait.Nodes) != 1 || wait.Nodes[0].Type != workflows.WaitNodeType || wait.Nodes[0].Parameters["incomingAuthentication"] != "headerAuth" {
		t.Errorf("templates/wait.json: %+v, want one Wait node with Header Auth", wait.Nodes)
	} else {
		var cred struct{ ID, Name string }
		_ = json.Unmarshal(wait.Nodes[0].Credentials[workflows.CredentialType], &cred)
		if cred.ID != workflows.ResumeCredentialID || cred.Name != workflows.ResumeCredentialName {
			t.Errorf("templates/wait.json checks credential %+v, want %s %q", cred, workflows.ResumeCredentialID, workflows.ResumeCredentialName)
		}
	}
}

// In a namespace that requires approval a reserve without payload or
// fingerprint is refused (an approval would bind nothing), and the
// resumed execution's reserve must carry the same content: every reserve
// the shipped workflows, templates and e2e workflows send carries one.
func TestReservesCarryTheirContent(t *testing.T) {
	sendsContent := regexp.MustCompile(`\b(payload|fingerprint): *[^ ,}]`)
	files, err := filepath.Glob(filepath.Join("..", "workflows", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("..", "workflows", "templates", "*.json"))
	tests, _ := filepath.Glob(filepath.Join("testdata", "*", "workflow.json"))
	reserves := 0
	for _, f := range append(append(files, more...), tests...) {
		var wf struct{ Nodes []n8nNode }
		readJSON(t, f, &wf)
		for _, n := range wf.Nodes {
			url, _ := n.Parameters["url"].(string)
			body, _ := n.Parameters["jsonBody"].(string)
			switch {
			case n.Type == "n8n-nodes-base.httpRequest" && strings.HasSuffix(url, "/v1/reserve"):
			case strings.HasSuffix(n.Type, ".n8nGuard") && (n.Parameters["operation"] == nil || n.Parameters["operation"] == "reserve"):
				opts, _ := n.Parameters["reserveOptions"].(map[string]any)
				if opts["payload"] != nil || opts["fingerprint"] != nil {
					body = "payload: (the node option)"
				}
			default:
				continue
			}
			reserves++
			if !sendsContent.MatchString(body) {
				t.Errorf("%s: %q reserves without payload or fingerprint", f, n.Name)
			}
		}
	}
	if reserves < 6 {
		t.Fatalf("found %d reserves, want the shipped, template and e2e ones", reserves)
	}
}

// An approver judges an event by its summary: every reserve the shipped
// workflows and the reserve templates send carries one, built from the
// event.
func TestReservesCarryASummary(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "workflows", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("..", "workflows", "templates", "reserve*.json"))
	reserves := 0
	for _, f := range append(files, more...) {
		var wf struct{ Nodes []n8nNode }
		readJSON(t, f, &wf)
		for _, n := range wf.Nodes {
			url, _ := n.Parameters["url"].(string)
			if n.Type != "n8n-nodes-base.httpRequest" || !strings.HasSuffix(url, "/v1/reserve") {
				continue
			}
			reserves++
			if body, _ := n.Parameters["jsonBody"].(string); !regexp.MustCompile(`\bsummary: *\$`).MatchString(body) {
				t.Errorf("%s: %q reserves without a summary", f, n.Name)
			}
		}
	}
	if reserves < 4 {
		t.Fatalf("found %d reserves, want the shipped and template ones", reserves)
	}
}
