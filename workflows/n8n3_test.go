package workflows

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
)

// The shipped workflows and every template `n8n guard` places use nothing
// n8n 3.0 removed and no Code node that may run into 3.x's 60 s
// task-runner timeout.
func TestShippedFilesFitN8n3(t *testing.T) {
	wfs, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	if len(wfs) < 4 {
		t.Fatalf("%d shipped workflows", len(wfs))
	}
	for _, w := range wfs {
		for _, p := range N8n3Problems(w.Nodes) {
			t.Errorf("workflow %q: %s", w.Name, p)
		}
	}
	names, _ := fs.Glob(shipped, "templates/*.json")
	if len(names) < 9 {
		t.Fatalf("%d templates", len(names))
	}
	for _, name := range names {
		b, err := shipped.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var clip struct {
			Nodes []map[string]any `json:"nodes"`
		}
		if err := json.Unmarshal(b, &clip); err != nil || len(clip.Nodes) == 0 {
			t.Fatalf("%s: %v, %d nodes", name, err, len(clip.Nodes))
		}
		for _, p := range N8n3Problems(clip.Nodes) {
			t.Errorf("template %s: %s", name, p)
		}
	}
}

// Each rule of the 3.0 list finds what it is about (a check that found
// nothing ever would pass the test above).
func TestN8n3ProblemsFindsWhat3Removed(t *testing.T) {
	code := func(js string) map[string]any {
		return map[string]any{"name": "c", "type": "n8n-nodes-base.code", "parameters": map[string]any{"jsCode": js}}
	}
	for _, c := range []struct {
		name string
		node map[string]any
		want string // "" for no problem
	}{
		{"Function node", map[string]any{"name": "f", "type": "n8n-nodes-base.function"}, "Function node"},
		{"Function Item node", map[string]any{"name": "f", "type": "n8n-nodes-base.functionItem"}, "Function Item"},
		{"Item Lists node", map[string]any{"name": "f", "type": "n8n-nodes-base.itemLists"}, "Item Lists"},
		{"Execute Workflow once for each item", map[string]any{"name": "x", "type": "n8n-nodes-base.executeWorkflow", "parameters": map[string]any{"mode": "each"}}, "Run once for each item"},
		{"Execute Workflow with all items", map[string]any{"name": "x", "type": "n8n-nodes-base.executeWorkflow", "parameters": map[string]any{"mode": "once"}}, ""},
		{"AI Agent v1", map[string]any{"name": "a", "type": "@n8n/n8n-nodes-langchain.agent", "typeVersion": 1.7}, "AI Agent"},
		{"AI Agent v2", map[string]any{"name": "a", "type": "@n8n/n8n-nodes-langchain.agent", "typeVersion": 2.0}, ""},
		{"If with Always Output Data", map[string]any{"name": "i", "type": "n8n-nodes-base.if", "alwaysOutputData": true}, "Always Output Data"},
		{"$getPairedItem", map[string]any{"name": "s", "type": "n8n-nodes-base.set", "parameters": map[string]any{"v": "={{ $getPairedItem('a') }}"}}, "$getPairedItem"},
		{"$evaluateExpression in Code", code("return [{json: {v: $evaluateExpression('{{1}}')}}]"), "$evaluateExpression"},
		{"a Code node that sleeps", code("await new Promise(r => setTimeout(r, 90000)); return items"), "waits"},
		{"a Code node that polls", code("let ok = false; while (!ok) { ok = check() }; return items"), "loops"},
		{"a Code node that calls out", code("const r = await this.helpers.httpRequest({url}); return [{json: r}]"), "network"},
		{"a Code node over its items", code("for (const item of $input.all()) { item.json.x = 1 }; return $input.all()"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := N8n3Problems([]map[string]any{c.node})
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("problems %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], c.want) {
				t.Fatalf("problems %q, want one saying %q", got, c.want)
			}
		})
	}
}
