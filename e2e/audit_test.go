//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// The three unguarded workflows a team typically has (n8nsetup/testdata/unguarded).
var auditShapes = []struct {
	file, name, path string
	publish          bool
	// prefix makes each workflow's event ids its own.
	prefix string
	// guards are the nodes that write, with the key `n8n guard` gets.
	guards [][2]string
}{
	{"webhook-post.json", "e2e-audit lead to CRM", "n8n-guard-e2e/audit-lead", true, "lead-",
		[][2]string{{"Create contact", "$json.body.event_id"}}},
	{"webhook-code-writes.json", "e2e-audit signup with note", "n8n-guard-e2e/audit-signup", true, "signup-",
		[][2]string{{"Create contact", "$json.event"}, {"Add note", "'note-' + $('Shape signup').item.json.event"}}},
	{"schedule-split-post.json", "e2e-audit orders batch", "", false, "",
		[][2]string{{"Post order", "'batch-' + $json.id"}}},
}

// TestAuditFindsUnguardedWritesAndGuardMakesThemExactlyOnce runs `n8n
// audit` and `n8n guard` against a real n8n through its public API: three
// unguarded workflows (webhook → POST to the CRM; webhook → Code → two
// writes; schedule → split → a POST per item) are each found (exit 1),
// guarded, and pass the audit (exit 0); then 20 simultaneous copies of
// each event write exactly once, the batch that hands out the same orders
// every 3 seconds writes each order once, and a second guard changes
// nothing.
func TestAuditFindsUnguardedWritesAndGuardMakesThemExactlyOnce(t *testing.T) {
	s := newSuite(t, guardConfig)
	s.startN8N(t, nil, nil, nil, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	key, err := s.n8n.OwnerAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	api := publicAPI{base: s.n8n.URL(), key: key}
	cli := func(args ...string) (string, error) { return s.guardCLI(key, append([]string{"n8n"}, args...)...) }
	if out, err := cli("setup", "--guard-url", s.guard.URL(), "--create-credential"); err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}

	ids := map[string]string{}
	for _, sh := range auditShapes {
		id, err := api.createFromFile(ctx, filepath.Join(s.repo, "n8nsetup", "testdata", "unguarded", sh.file), s.crm.URL())
		if err != nil {
			t.Fatal(err)
		}
		ids[sh.file] = id
		if sh.publish {
			if err := api.publish(ctx, id, s.install.Major()); err != nil {
				t.Fatal(err)
			}
		}
	}

	out, err := cli("audit")
	if err == nil {
		t.Fatalf("audit passed with four unguarded writes:\n%s", out)
	}
	for _, sh := range auditShapes {
		for _, gd := range sh.guards {
			want := fmt.Sprintf("n8n-guard n8n guard --workflow %s --node '%s' --key", ids[sh.file], gd[0])
			if !strings.Contains(out, want) {
				t.Errorf("audit does not name the fix %q:\n%s", want, out)
			}
		}
	}
	jsonOut, err := s.guardCLIStdout(key, "n8n", "audit", "--json")
	var found struct {
		Findings []struct {
			WorkflowID string `json:"workflow_id"`
			Node       string `json:"node"`
			Guarded    bool   `json:"guarded"`
		} `json:"findings"`
	}
	if err == nil || json.Unmarshal([]byte(jsonOut), &found) != nil || len(found.Findings) != 4 {
		t.Fatalf("audit --json: %v, want exit 1 and four findings:\n%s", err, jsonOut)
	}
	t.Logf("audit before guard:\n%s", out)

	for _, sh := range auditShapes {
		for _, gd := range sh.guards {
			args := []string{"guard", "--workflow", ids[sh.file], "--node", gd[0], "--key", gd[1]}
			if out, err := cli(append(args, "--dry-run")...); err != nil || !strings.Contains(out, "would add node") {
				t.Fatalf("guard --dry-run %s: %v\n%s", gd[0], err, out)
			}
			out, err := cli(args...)
			if err != nil || !strings.Contains(out, `add node "n8n-guard: reserve `+gd[0]+`"`) {
				t.Fatalf("guard %s: %v\n%s", gd[0], err, out)
			}
			if !sh.publish && !strings.Contains(out, "is not published") {
				t.Errorf("guard of an unpublished workflow does not say so:\n%s", out)
			}
		}
	}
	out, err = cli("audit")
	if err != nil {
		t.Fatalf("audit after guard: %v\n%s", err, out)
	}
	t.Logf("audit after guard:\n%s", out)

	before, err := api.workflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range before {
		if (w.ID == ids["webhook-post.json"] || w.ID == ids["webhook-code-writes.json"]) && (!w.Active || (s.install.Major() >= 2 && w.ActiveVersionID != w.VersionID)) {
			t.Errorf("%s %s is not live with the guard after guard: %+v", w.ID, w.Name, w)
		}
	}

	t.Run("20 copies of each event at once: one write per event", func(t *testing.T) {
		for _, sh := range auditShapes[:2] {
			if err := s.n8n.WaitForWebhook(ctx, sh.path); err != nil {
				t.Fatal(err)
			}
		}
		events := []string{"evt-aud-1", "evt-aud-2", "evt-aud-3"}
		var mu sync.Mutex
		answers := map[string]int{}
		// One event at a time, its 20 copies at once: the machine is shared.
		for _, sh := range auditShapes[:2] {
			for _, ev := range events {
				var wg sync.WaitGroup
				for i := 0; i < 20; i++ {
					wg.Add(1)
					go func(path, ev string) {
						defer wg.Done()
						r := s.send(t, path, map[string]any{"event_id": ev, "email": ev + "@example.org"})
						mu.Lock()
						answers[fmt.Sprintf("%d %s", r.Status, r.Code)]++
						mu.Unlock()
					}(sh.path, sh.prefix+ev)
				}
				wg.Wait()
			}
		}
		t.Logf("answers: %v", answers)
		for _, ev := range events {
			for _, k := range []string{"lead-" + ev, "signup-" + ev, "note-signup-" + ev} {
				if w := s.crm.Writes(k); w != 1 {
					t.Errorf("%s written %d times, want once", k, w)
				}
			}
		}
		if answers["200 accepted"] != 3 {
			t.Errorf("%d copies of the lead events were answered accepted, want one per event: %v", answers["200 accepted"], answers)
		}
	})

	t.Run("a batch that hands out the same orders every run writes each once", func(t *testing.T) {
		id := ids["schedule-split-post.json"]
		if err := api.publish(ctx, id, s.install.Major()); err != nil {
			t.Fatal(err)
		}
		// It keeps running (every 3 s) until n8n stops at the end of the test.
		testwait.WithinEvery(t, 3*time.Minute, testwait.Outside, "three runs of the batch", func() bool { return s.runs(t, ctx, api, id) >= 3 })
		for _, o := range []string{"order-1", "order-2", "order-3"} {
			if w := s.crm.Writes("batch-" + o); w != 1 {
				t.Errorf("%s written %d times, want once", o, w)
			}
		}
	})

	t.Run("a second guard changes nothing", func(t *testing.T) {
		before, err := api.workflows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range auditShapes {
			for _, gd := range sh.guards {
				out, err := cli("guard", "--workflow", ids[sh.file], "--node", gd[0], "--key", gd[1])
				if err != nil || !strings.Contains(out, "nothing to change") {
					t.Fatalf("second guard of %s: %v\n%s", gd[0], err, out)
				}
			}
		}
		after, err := api.workflows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(stamps(before)) != fmt.Sprint(stamps(after)) {
			t.Fatalf("the second guard changed workflows:\nbefore %v\nafter  %v", stamps(before), stamps(after))
		}
	})

	t.Run("2.x: an unpublished edit is audited as the draft and guarded as a draft", func(t *testing.T) {
		if s.install.Major() < 2 {
			t.Skip("SKIP: n8n 1.x has no drafts")
		}
		id := ids["webhook-post.json"]
		var wf map[string]any
		if err := api.call(ctx, http.MethodGet, "/workflows/"+id, nil, &wf); err != nil {
			t.Fatal(err)
		}
		published := wf["activeVersionId"]
		nodes := wf["nodes"].([]any)
		nodes = append(nodes, map[string]any{
			"name": "Notify sales", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2, "position": []int{1200, 300},
			"parameters": map[string]any{"method": "POST", "url": s.crm.URL() + "/notify", "options": map[string]any{}},
		})
		conns := wf["connections"].(map[string]any)
		conns["Answer"] = map[string]any{"main": []any{[]any{map[string]any{"node": "Notify sales", "type": "main", "index": 0}}}}
		body := map[string]any{"name": wf["name"], "nodes": nodes, "connections": conns, "settings": wf["settings"]}
		if err := api.call(ctx, http.MethodPut, "/workflows/"+id+"?publishIfActive=false", body, nil); err != nil {
			t.Fatal(err)
		}
		out, err := cli("audit")
		if err == nil || !strings.Contains(out, "Notify sales") || !strings.Contains(out, "draft") {
			t.Fatalf("audit of a draft with an unguarded write: %v\n%s", err, out)
		}
		out, err = cli("guard", "--workflow", id, "--node", "Notify sales", "--key", "'notify-' + $('Lead webhook').item.json.body.event_id")
		if err != nil || !strings.Contains(out, "has unpublished edits") {
			t.Fatalf("guard of a draft: %v\n%s", err, out)
		}
		if out, err := cli("audit"); err != nil {
			t.Fatalf("audit after guarding the draft: %v\n%s", err, out)
		}
		if err := api.call(ctx, http.MethodGet, "/workflows/"+id, nil, &wf); err != nil {
			t.Fatal(err)
		}
		if wf["activeVersionId"] != published || wf["versionId"] == published {
			t.Fatalf("published %v → %v, saved %v: the draft was published or not saved", published, wf["activeVersionId"], wf["versionId"])
		}
	})
}

// guardCLIStdout runs the binary and returns its standard output only.
func (s *suite) guardCLIStdout(key string, args ...string) (string, error) {
	cmd := exec.Command(s.guardBin, args...)
	cmd.Env = append(os.Environ(), "N8N_URL="+s.n8n.URL(), "N8N_API_KEY="+key, "N8N_GUARD_TOKEN="+guardToken)
	out, err := cmd.Output()
	return string(out), err
}

// createFromFile creates a workflow from a file as n8n exports it, with
// the fake CRM's address filled in: only what the public API takes.
func (a publicAPI) createFromFile(ctx context.Context, path, crmURL string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var wf map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(b), "{{CRM_URL}}", crmURL)), &wf); err != nil {
		return "", err
	}
	var created apiWorkflow
	err = a.call(ctx, http.MethodPost, "/workflows", map[string]any{
		"name": wf["name"], "nodes": wf["nodes"], "connections": wf["connections"], "settings": wf["settings"],
	}, &created)
	return created.ID, err
}

func (a publicAPI) publish(ctx context.Context, id string, major int) error {
	verb := "/activate"
	if major >= 2 {
		verb = "/publish"
	}
	return a.call(ctx, http.MethodPost, "/workflows/"+id+verb, map[string]any{}, nil)
}

// runs counts a workflow's finished executions.
func (s *suite) runs(t *testing.T, ctx context.Context, a publicAPI, id string) int {
	var page struct {
		Data []struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := a.call(ctx, http.MethodGet, "/executions?limit=100&workflowId="+id, nil, &page); err != nil {
		// Said, not swallowed: a key without execution:list is refused 403
		// and the batch looked as if it never ran.
		t.Logf("listing the executions of %s: %v", id, err)
		return 0
	}
	n := 0
	for _, e := range page.Data {
		if e.Status == "success" {
			n++
		}
	}
	return n
}
