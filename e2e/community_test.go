//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The case for the community node (n8n-nodes/). It runs when
// n8n-nodes/dist exists (cd n8n-nodes && npm ci && npm run build) and
// e2e/testdata/community/workflow.json holds a workflow with id
// communityWorkflowID, webhook communityPath, answering like lead-to-crm
// (code, key, result_ref). e2e/testdata/community/credentials.json, if
// present, is imported with `n8n import:credentials` after "{{GUARD_URL}}"
// and "{{TOKEN}}" in it are filled in. Otherwise the case is skipped and
// says which part is missing.
const (
	communityWorkflowID = "n8nGuardE2eNode1"
	communityPath       = "n8n-guard-e2e/community"
)

// communityNode prepares n8n's environment for the community node and adds
// its workflow to files; false when the node is not built.
func (s *suite) communityNode(env map[string]string, files map[string][]byte) bool {
	pkg := filepath.Join(s.repo, "n8n-nodes")
	if _, err := os.Stat(filepath.Join(pkg, "dist")); err != nil {
		s.communityReady = "n8n-nodes/dist is absent: build it with `cd n8n-nodes && npm ci && npm run build` to run this case"
		return false
	}
	wf := filepath.Join(s.repo, "e2e", "testdata", "community", "workflow.json")
	b, err := os.ReadFile(wf)
	if err != nil {
		s.communityReady = "e2e/testdata/community/workflow.json is absent: add a workflow using the node (id " +
			communityWorkflowID + ", webhook " + communityPath + ") to run this case"
		return false
	}
	files["community-workflow.json"] = s.fill(b)
	// n8n loads every *.node.js below N8N_CUSTOM_EXTENSIONS, so it points at
	// dist/ (not at n8n-nodes/ with its node_modules). The node type is then
	// CUSTOM.n8nGuard.
	env["N8N_CUSTOM_EXTENSIONS"] = filepath.Join(pkg, "dist")
	return true
}

// importCommunityCredentials runs before the workflows are imported.
func (s *suite) importCommunityCredentials() error {
	f := filepath.Join(s.repo, "e2e", "testdata", "community", "credentials.json")
	b, err := os.ReadFile(f)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	filled := strings.NewReplacer("{{GUARD_URL}}", s.guard.URL(), "{{TOKEN}}", guardToken).Replace(string(b))
	out := filepath.Join(s.work, "community-credentials.json")
	if err := os.WriteFile(out, []byte(filled), 0o600); err != nil {
		return err
	}
	return s.n8n.CLI("import:credentials", "--input="+out)
}

// caseCommunityNode: the node's workflow writes once and answers a repeat
// as a duplicate, like the HTTP-node workflow.
func (s *suite) caseCommunityNode(t *testing.T) {
	if s.communityReady != "" {
		t.Skip(s.communityReady)
	}
	key := "evt-node-1"
	first := s.send(t, communityPath, lead(key, "node@example.org"))
	expect(t, first, 200, "accepted")
	again := s.send(t, communityPath, lead(key, "node@example.org"))
	expect(t, again, 200, "duplicate_event")
	if got := s.crm.Writes(key); got != 1 {
		t.Fatalf("CRM writes for %s = %d, want 1", key, got)
	}
	if again.Ref != first.Ref {
		t.Fatalf("duplicate answered result_ref %q, first write %q", again.Ref, first.Ref)
	}
	burstKey := "evt-node-burst"
	codes := map[string]int{}
	for _, r := range s.burst(t, communityPath, lead(burstKey, "node@example.org"), 20) {
		codes[r.Code]++
	}
	if got := s.crm.Writes(burstKey); got != 1 || codes["accepted"] != 1 {
		t.Fatalf("20 simultaneous copies through the node: %d CRM writes, answers %v; want 1 write, 1 accepted", got, codes)
	}
	t.Logf("community node: 20 copies → 1 CRM write; answers %v", codes)
}
