//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGuardPlacesTheCommunityNode: on an n8n with the community node
// (n8n-nodes/dist loaded as community_test.go loads it, type
// CUSTOM.n8nGuard) and a team workflow that uses it already, `n8n guard`
// on an unguarded webhook → POST to the CRM picks the community node by
// itself (--use auto): its Reserve, Complete and Fail with the node's
// credential around the write. Then 20 copies of one event at once write
// once, a second guard changes nothing, and the audit passes.
func TestGuardPlacesTheCommunityNode(t *testing.T) {
	s := newSuite(t, guardConfig)
	dist := filepath.Join(s.repo, "n8n-nodes", "dist")
	if _, err := os.Stat(dist); err != nil {
		t.Skip("SKIP: n8n-nodes/dist is absent: build it with `cd n8n-nodes && npm ci && npm run build` to run this case")
	}
	s.startN8N(t, map[string]string{"N8N_CUSTOM_EXTENSIONS": dist}, nil, nil, nil, false)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	key, err := s.n8n.OwnerAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	api := publicAPI{base: s.n8n.URL(), key: key}
	cli := func(args ...string) (string, error) { return s.guardCLI(key, append([]string{"n8n"}, args...)...) }

	// The team's own workflow with the node and its credential, as they
	// made them in the editor (not published).
	var cred struct {
		ID string `json:"id"`
	}
	data := map[string]any{"baseUrl": s.guard.URL(), "token": guardToken}
	if s.install.Major() < 2 {
		// 1.x adds the HTTP Request node's domain restriction to the
		// type, and its API requires allowedDomains without it.
		data["allowedHttpRequestDomains"] = "all"
	}
	if err := api.call(ctx, http.MethodPost, "/credentials", map[string]any{
		"name": "n8n-guard node", "type": "n8nGuardApi", "data": data,
	}, &cred); err != nil {
		t.Fatalf("creating the community node's credential (is the node loaded?): %v", err)
	}
	if _, err := api.createCommunityWorkflow(ctx, filepath.Join(s.repo, "e2e", "testdata", "community", "workflow.json"), s.crm.URL(), cred.ID); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("setup", "--guard-url", s.guard.URL(), "--create-credential"); err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}

	id, err := api.createFromFile(ctx, filepath.Join(s.repo, "n8nsetup", "testdata", "unguarded", "webhook-post.json"), s.crm.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := api.publish(ctx, id, s.install.Major()); err != nil {
		t.Fatal(err)
	}
	args := []string{"guard", "--workflow", id, "--node", "Create contact", "--key", "$json.body.event_id"}
	if out, err := cli(append(args, "--dry-run")...); err != nil || !strings.Contains(out, "would add node") || !strings.Contains(out, "community node CUSTOM.n8nGuard") {
		t.Fatalf("guard --dry-run: %v, want the community node's nodes listed\n%s", err, out)
	}
	out, err := cli(args...)
	if err != nil || !strings.Contains(out, "community node CUSTOM.n8nGuard") || !strings.Contains(out, `add node "n8n-guard: reserve Create contact"`) {
		t.Fatalf("guard: %v, want the community node placed\n%s", err, out)
	}
	t.Logf("guard:\n%s", out)
	var wf struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := api.call(ctx, http.MethodGet, "/workflows/"+id, nil, &wf); err != nil {
		t.Fatal(err)
	}
	ops := map[string]string{}
	for _, n := range wf.Nodes {
		if n["type"] == "CUSTOM.n8nGuard" {
			p, _ := n["parameters"].(map[string]any)
			c, _ := n["credentials"].(map[string]any)
			ref, _ := c["n8nGuardApi"].(map[string]any)
			ops[fmt.Sprint(p["operation"])] = fmt.Sprint(ref["id"])
		}
		if n["type"] == "n8n-nodes-base.httpRequest" && strings.Contains(fmt.Sprint(n["parameters"]), "/v1/") {
			t.Errorf("an HTTP template was placed: %v", n["name"])
		}
	}
	for _, op := range []string{"reserve", "complete", "fail"} {
		if ops[op] != cred.ID {
			t.Errorf("the community node's %s is not there with the team's credential %s: %v", op, cred.ID, ops)
		}
	}

	const path = "n8n-guard-e2e/audit-lead"
	if err := s.n8n.WaitForWebhook(ctx, path); err != nil {
		t.Fatal(err)
	}
	// n8n 2.41.1 publishes a saved change through its publication outbox,
	// after the API answered: the guarded version is live once a copy of
	// a probe event is answered as one.
	live := false
	for i := 0; i < 30 && !live; i++ {
		probe := fmt.Sprintf("evt-cn-probe-%d", i)
		s.send(t, path, lead(probe, "cn@example.org"))
		if r := s.send(t, path, lead(probe, "cn@example.org")); r.Code == "duplicate_event" {
			live = true
			t.Logf("the guarded version answered after %d probe(s)", i+1)
		} else {
			time.Sleep(2 * time.Second)
		}
	}
	if !live {
		t.Fatal("the guarded version never went live: copies of a probe event were written again for a minute")
	}
	first := s.send(t, path, lead("evt-cn-1", "cn@example.org"))
	expect(t, first, 200, "accepted")
	again := s.send(t, path, lead("evt-cn-1", "cn@example.org"))
	expect(t, again, 200, "duplicate_event")
	if again.Ref != first.Ref || first.Ref == "" {
		t.Errorf("the copy answered result_ref %q, the write %q", again.Ref, first.Ref)
	}
	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.send(t, path, lead("evt-cn-burst", "cn@example.org"))
			mu.Lock()
			answers[fmt.Sprintf("%d %s", r.Status, r.Code)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("20 copies at once: %v", answers)
	for _, k := range []string{"evt-cn-1", "evt-cn-burst"} {
		if w := s.crm.Writes(k); w != 1 {
			t.Errorf("%s written %d times, want once", k, w)
		}
	}
	if answers["200 accepted"] != 1 {
		t.Errorf("%d copies answered accepted, want 1: %v", answers["200 accepted"], answers)
	}

	before, err := api.workflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err = cli(args...)
	if err != nil || !strings.Contains(out, "nothing to change") {
		t.Fatalf("second guard: %v\n%s", err, out)
	}
	after, err := api.workflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(stamps(before)) != fmt.Sprint(stamps(after)) {
		t.Fatalf("the second guard changed workflows:\nbefore %v\nafter  %v", stamps(before), stamps(after))
	}
	if out, err := cli("audit"); err != nil {
		t.Fatalf("audit after guard: %v\n%s", err, out)
	}
}

// createCommunityWorkflow creates the community node's test workflow with
// the CRM's address and the credential's id filled in, without an error
// workflow (setup gives it the guard's).
func (a publicAPI) createCommunityWorkflow(ctx context.Context, path, crmURL, credID string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	filled := strings.NewReplacer("{{CRM_URL}}", crmURL, "n8nGuardNodeApi1", credID).Replace(string(b))
	var wf map[string]any
	if err := json.Unmarshal([]byte(filled), &wf); err != nil {
		return "", err
	}
	settings, _ := wf["settings"].(map[string]any)
	delete(settings, "errorWorkflow")
	var created apiWorkflow
	err = a.call(ctx, http.MethodPost, "/workflows", map[string]any{
		"name": wf["name"], "nodes": wf["nodes"], "connections": wf["connections"], "settings": settings,
	}, &created)
	return created.ID, err
}
