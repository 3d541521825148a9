//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// setupGuardConfig names the owner of the ten workflows a team made.
const setupGuardConfig = `notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
  group_window: 1s
owners:
  - workflow: "team-*"
    owner: U0TEAM
    channel: C0TEAM
`

// TestSetup runs `n8n-guard n8n setup` and `check` against a real n8n
// through its public API: on a fresh instance, then on one where a team has
// ten published workflows without an error workflow. Every one of the ten
// ends up pointing at the published handler, a failure in any reaches its
// owner in Slack once, and a second setup changes nothing.
func TestSetup(t *testing.T) {
	s := newSuite(t, setupGuardConfig)
	s.startN8N(t, nil, nil, nil, nil, false) // fresh: no workflow, no credential
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	key, err := s.n8n.OwnerAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	api := publicAPI{base: s.n8n.URL(), key: key}
	setup := func(args ...string) (string, error) {
		return s.guardCLI(key, append([]string{"n8n", "setup", "--guard-url", s.guard.URL()}, args...)...)
	}
	check := func() (string, error) { return s.guardCLI(key, "n8n", "check") }

	// A wrong key is said as such, and nothing is changed.
	if out, err := s.guardCLI("not-a-key", "n8n", "check"); err == nil || !strings.Contains(out, "refused the API key") {
		t.Fatalf("check with a wrong key: %v\n%s", err, out)
	}

	out, err := setup("--create-credential")
	if err != nil {
		t.Fatalf("setup on a fresh instance: %v\n%s", err, out)
	}
	for _, want := range []string{`create credential "n8n-guard API token"`, `create workflow "n8n-guard: errors to owner"`} {
		if !strings.Contains(out, want) {
			t.Errorf("setup on a fresh instance did not %s:\n%s", want, out)
		}
	}
	if s.install.Major() >= 2 && !strings.Contains(out, "publish workflow") {
		t.Errorf("setup on 2.x did not publish the error handler:\n%s", out)
	}
	if out, err := check(); err != nil {
		t.Fatalf("check after setup on a fresh instance: %v\n%s", err, out)
	}

	// A team's ten workflows, published, none with an error workflow.
	var team []string
	for i := 1; i <= 10; i++ {
		id, err := api.createThrowing(ctx, i, s.install.Major())
		if err != nil {
			t.Fatal(err)
		}
		team = append(team, id)
	}
	out, err = check()
	if err == nil {
		t.Fatalf("check passed with ten workflows without an error workflow:\n%s", out)
	}
	for _, id := range team {
		if !strings.Contains(out, "SILENT "+id) {
			t.Errorf("check does not list %s:\n%s", id, out)
		}
	}
	dry, err := setup("--dry-run")
	if err != nil || strings.Count(dry, "would set error workflow") != 10 {
		t.Fatalf("dry run: %v\n%s", err, dry)
	}
	if _, err := check(); err == nil {
		t.Fatal("the dry run changed something: check passes")
	}

	out, err = setup()
	if err != nil || strings.Count(out, "set error workflow") != 10 {
		t.Fatalf("setup with ten workflows: %v\n%s", err, out)
	}
	before, err := api.workflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	handler := ""
	for _, w := range before {
		if w.Name == "n8n-guard: errors to owner" {
			handler = w.ID
			if s.install.Major() >= 2 && w.ActiveVersionID == "" {
				t.Errorf("the error handler is not published: %+v", w)
			}
		}
	}
	for _, w := range before {
		if strings.HasPrefix(w.Name, "team-") {
			if w.Settings["errorWorkflow"] != handler || handler == "" {
				t.Errorf("%s %s: errorWorkflow %v, want the handler %q", w.ID, w.Name, w.Settings["errorWorkflow"], handler)
			}
			if !w.Active {
				t.Errorf("%s %s is no longer published after setup", w.ID, w.Name)
			}
		}
	}

	// Again: nothing changes, not even a version or a save time.
	out, err = setup()
	if err != nil || !strings.Contains(out, "nothing to change") {
		t.Fatalf("second setup: %v\n%s", err, out)
	}
	after, err := api.workflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(stamps(before)) != fmt.Sprint(stamps(after)) {
		t.Fatalf("the second setup changed workflows:\nbefore %v\nafter  %v", stamps(before), stamps(after))
	}
	if out, err := check(); err != nil {
		t.Fatalf("check after setup: %v\n%s", err, out)
	}

	// A failure in any of the ten reaches its owner, once.
	for i := 1; i <= 10; i++ {
		r := s.send(t, fmt.Sprintf("team/%02d", i), map[string]any{"field": "company"})
		if r.Status != http.StatusOK {
			t.Fatalf("team/%02d answered %s", i, r)
		}
	}
	for i := 1; i <= 10; i++ {
		s.waitSlack(t, 2*time.Minute, fmt.Sprintf("team-%02d", i), "U0TEAM")
	}
	time.Sleep(3 * time.Second) // a second message would come within the group window
	for i := 1; i <= 10; i++ {
		name, n := fmt.Sprintf("team-%02d", i), 0
		for _, m := range s.slack.Messages() {
			if strings.Contains(m.Content(), name) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d Slack messages about %s, want 1", n, name)
		}
	}
}

// guardCLI runs the n8n-guard binary against this suite's n8n.
func (s *suite) guardCLI(key string, args ...string) (string, error) {
	cmd := exec.Command(s.guardBin, args...)
	cmd.Env = append(os.Environ(), "N8N_URL="+s.n8n.URL(), "N8N_API_KEY="+key, "N8N_GUARD_TOKEN="+guardToken)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// publicAPI is the test's own view of n8n's public API, to make and read
// workflows the way a team's tools would.
type publicAPI struct{ base, key string }

type apiWorkflow struct {
	ID              string         `json:"id"`
	Name            string         `json:"name"`
	Active          bool           `json:"active"`
	ActiveVersionID string         `json:"activeVersionId"`
	VersionID       string         `json:"versionId"`
	UpdatedAt       string         `json:"updatedAt"`
	Settings        map[string]any `json:"settings"`
}

// stamps are what a save changes: the version and the save time.
func stamps(ws []apiWorkflow) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.ID+" "+w.VersionID+" "+w.ActiveVersionID+" "+w.UpdatedAt)
	}
	return out
}

func (a publicAPI) call(ctx context.Context, method, path string, body, out any) error {
	return callJSON(ctx, method, a.base+"/api/v1"+path, "X-N8N-API-KEY", a.key, body, out)
}

func (a publicAPI) workflows(ctx context.Context) ([]apiWorkflow, error) {
	var page struct {
		Data []apiWorkflow `json:"data"`
	}
	err := a.call(ctx, http.MethodGet, "/workflows?limit=250", nil, &page)
	return page.Data, err
}

// createThrowing makes and publishes team-<i>, whose Code node throws like
// a team's workflow with a bug; it has no error workflow.
func (a publicAPI) createThrowing(ctx context.Context, i, major int) (string, error) {
	wf := map[string]any{
		"name": fmt.Sprintf("team-%02d", i),
		"nodes": []any{
			map[string]any{"name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2, "position": []int{0, 0},
				"webhookId":  fmt.Sprintf("0b0e2e00-0000-4000-8002-%012d", i),
				"parameters": map[string]any{"httpMethod": "POST", "path": fmt.Sprintf("team/%02d", i), "options": map[string]any{}}},
			map[string]any{"name": "Map fields", "type": "n8n-nodes-base.code", "typeVersion": 2, "position": []int{220, 0},
				"parameters": map[string]any{"mode": "runOnceForEachItem", "jsCode": "throw new Error('mapping of ' + $json.body.field + ' broke');"}},
		},
		"connections": map[string]any{"Webhook": map[string]any{"main": []any{[]any{map[string]any{"node": "Map fields", "type": "main", "index": 0}}}}},
		"settings":    map[string]any{"executionOrder": "v1"},
	}
	var created apiWorkflow
	if err := a.call(ctx, http.MethodPost, "/workflows", wf, &created); err != nil {
		return "", err
	}
	verb := "/activate"
	if major >= 2 {
		verb = "/publish"
	}
	return created.ID, a.call(ctx, http.MethodPost, "/workflows/"+created.ID+verb, map[string]any{}, nil)
}
