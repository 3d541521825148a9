//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/n8n-guard/n8n-guard/workflows"
)

const (
	templatesWorkflowID = "n8nGuardE2eTmpls"
	templatesPath       = "n8n-guard-e2e/templates"
)

// templatesWorkflow pastes the shipped HTTP-node templates, unchanged but
// for their names and positions, into one workflow the way a user would:
// reserve → complete for one key; reserve → fail (unknown) → resolve for a
// second; then lookup of the first, whose record is the webhook's answer.
func templatesWorkflow(guardURL string) ([]byte, error) {
	tpl := workflows.Template
	code := func(js string) map[string]any {
		return map[string]any{
			"type": "n8n-nodes-base.code", "typeVersion": 2,
			"parameters": map[string]any{"mode": "runOnceForEachItem", "jsCode": js},
		}
	}
	const key = "$('Templates webhook').item.json.body.key"
	steps := []struct {
		name string
		node func() (map[string]any, error)
	}{
		{"Templates webhook", func() (map[string]any, error) {
			return map[string]any{
				"type": "n8n-nodes-base.webhook", "typeVersion": 2, "webhookId": "0b0e2e00-0000-4000-8000-0000000000a5",
				"parameters": map[string]any{"httpMethod": "POST", "path": templatesPath, "responseMode": "lastNode", "options": map[string]any{}},
			}, nil
		}},
		{"Config", func() (map[string]any, error) { return tpl("config") }},
		{"Input A", func() (map[string]any, error) {
			return code("return { json: { namespace: 'e2e-templates', key: " + key + " + '-a', payload: { n: 1 } } };"), nil
		}},
		{"Reserve A", func() (map[string]any, error) { return tpl("reserve") }},
		{"To complete A", func() (map[string]any, error) {
			return code("return { json: { namespace: 'e2e-templates', key: " + key + " + '-a', token: $json.body.token, result_ref: 'tpl-ref-a' } };"), nil
		}},
		{"Complete A", func() (map[string]any, error) { return tpl("complete") }},
		{"Input B", func() (map[string]any, error) {
			return code("return { json: { namespace: 'e2e-templates', key: " + key + " + '-b' } };"), nil
		}},
		{"Reserve B", func() (map[string]any, error) { return tpl("reserve") }},
		{"To fail B", func() (map[string]any, error) {
			return code("return { json: { namespace: 'e2e-templates', key: " + key + " + '-b', token: $json.body.token, reason: 'outcome_unknown', message: 'e2e: no answer in time' } };"), nil
		}},
		{"Fail B", func() (map[string]any, error) { return tpl("fail") }},
		{"To resolve B", func() (map[string]any, error) {
			return code("return { json: { namespace: 'e2e-templates', key: " + key + " + '-b', resolution: 'completed', by: 'e2e', note: 'checked the target', result_ref: 'tpl-ref-b' } };"), nil
		}},
		{"Resolve B", func() (map[string]any, error) { return tpl("resolve") }},
		{"To lookup A", func() (map[string]any, error) {
			return code("return { json: { namespace: 'e2e-templates', key: " + key + " + '-a' } };"), nil
		}},
		{"Lookup A", func() (map[string]any, error) { return tpl("lookup") }},
	}
	var nodes []map[string]any
	conns := map[string]any{}
	for i, st := range steps {
		n, err := st.node()
		if err != nil {
			return nil, err
		}
		n["name"] = st.name
		n["id"] = fmt.Sprintf("0b0e2e00-0000-4000-8001-%012d", i)
		n["position"] = []int{i * 220, 0}
		nodes = append(nodes, n)
		if i > 0 {
			conns[steps[i-1].name] = map[string]any{"main": []any{[]any{map[string]any{"node": st.name, "type": "main", "index": 0}}}}
		}
	}
	// The one value a user edits in the pasted Config node.
	if !workflows.SetConfig(nodes, workflows.GuardURL, guardURL) {
		return nil, fmt.Errorf("templates/config.json has no %s", workflows.GuardURL)
	}
	return json.MarshalIndent(map[string]any{
		"id": templatesWorkflowID, "name": "e2e-templates", "nodes": nodes, "connections": conns,
		"active": false, "settings": map[string]any{"executionOrder": "v1", "errorWorkflow": errorWorkflow},
		"pinData": map[string]any{}, "tags": []any{},
	}, "", "  ")
}

// The five templates, pasted as they ship, drive the guard through n8n.
func (s *suite) caseTemplates(t *testing.T) {
	r := s.send(t, templatesPath, map[string]any{"key": "tpl-1"})
	if r.Status != 200 {
		t.Fatalf("templates workflow answered %s", r)
	}
	var rec record
	if err := json.Unmarshal([]byte(r.Raw), &rec); err != nil || rec.State != "completed" || rec.ResultRef != "tpl-ref-a" {
		t.Fatalf("lookup template answered %s, want tpl-1-a completed with tpl-ref-a", r.Raw)
	}
	if b := s.lookup(t, "e2e-templates", "tpl-1-b"); b.State != "completed" || b.ResultRef != "tpl-ref-b" {
		t.Fatalf("after fail + resolve templates, tpl-1-b is %+v, want completed with tpl-ref-b", b)
	}
}
