package workflows

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// n8n 3.0's documented changes to what a workflow may hold (n8n's "v3.0
// breaking changes" page, read 2026-12-07): nodes and modes it removed,
// helpers it dropped, and the task runner's timeout cut from 300 s to 60 s,
// which fails any Code node that runs long. The shipped workflows, the
// templates and what `n8n guard` writes are checked against it; n8n's own
// Settings > Migration Report checks an instance's workflows the same way.

// removedIn3 are the node types n8n 3.0 removed, and what replaces them.
var removedIn3 = map[string]string{
	"n8n-nodes-base.function":             "the Function node (use the Code node, Run Once for All Items)",
	"n8n-nodes-base.functionItem":         "the Function Item node (use the Code node, Run Once for Each Item)",
	"n8n-nodes-base.itemLists":            "the Item Lists node (use Split Out, Aggregate, Sort, Limit, Remove Duplicates or Summarize)",
	"@n8n/n8n-nodes-langchain.code":       "the LangChain Code node",
	"n8n-nodes-base.aiTransform":          "the AI Transform node (migrated to a Code node on upgrade; it can no longer be added)",
	"@n8n/n8n-nodes-langchain.agent@v1":   "version 1 of the AI Agent node and its agent modes",
	"n8n-nodes-base.executeWorkflow@each": "the Execute Workflow node's Run once for each item mode (use Loop Over Items before it, in Run once with all items mode)",
}

// codeRunsLong are the things a Code node must not do under 3.x's 60 s
// task-runner timeout: wait, loop until something happens, or call out
// (a slow answer holds the task). The guard's own calls belong in HTTP
// Request nodes, whose timeout is the node's.
var codeRunsLong = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`\bsetTimeout\s*\(|\bsetInterval\s*\(|\bsleep\s*\(`), "waits"},
	{regexp.MustCompile(`\bwhile\s*\(|\bfor\s*\(\s*;\s*;\s*\)|\bdo\s*\{`), "loops until something happens"},
	{regexp.MustCompile(`\bhelpers\.(httpRequest|request)\w*\s*\(|\bfetch\s*\(`), "calls out over the network"},
}

var multiOutput = map[string]bool{"n8n-nodes-base.if": true, "n8n-nodes-base.switch": true}

// N8n3Problems says what in the nodes n8n 3.0 removed or would fail (one
// line a problem, naming the node), nil when nothing.
func N8n3Problems(nodes []map[string]any) []string {
	var out []string
	for _, n := range nodes {
		typ, _ := n["type"].(string)
		name, _ := n["name"].(string)
		p, _ := n["parameters"].(map[string]any)
		add := func(format string, args ...any) {
			out = append(out, fmt.Sprintf("node %q: ", name)+fmt.Sprintf(format, args...))
		}
		if why, ok := removedIn3[typ]; ok {
			add("n8n 3.0 removed %s", why)
		}
		if v, _ := n["typeVersion"].(float64); typ == "@n8n/n8n-nodes-langchain.agent" && v < 2 {
			add("n8n 3.0 removed %s", removedIn3[typ+"@v1"])
		}
		if typ == "n8n-nodes-base.executeWorkflow" && p["mode"] == "each" {
			add("n8n 3.0 removed %s", removedIn3[typ+"@each"])
		}
		if multiOutput[typ] && n["alwaysOutputData"] == true {
			add("n8n 3.0 changed Always Output Data on nodes with several outputs (an empty item only when every output is empty)")
		}
		raw, _ := json.Marshal(p)
		if strings.Contains(string(raw), "$getPairedItem") {
			add("n8n 3.0 removed the $getPairedItem helper (use $(\"<node>\").item)")
		}
		if typ != "n8n-nodes-base.code" {
			continue
		}
		code, _ := p["jsCode"].(string)
		if py, _ := p["pythonCode"].(string); py != "" {
			code += "\n" + py
		}
		if strings.Contains(code, "$evaluateExpression") {
			add("n8n 3.0 removed $evaluateExpression() from the Code node")
		}
		for _, r := range codeRunsLong {
			if r.re.MatchString(code) {
				add("its Code %s: n8n 3.x stops a Code node task after 60 s (N8N_RUNNERS_TASK_TIMEOUT, 300 s before)", r.why)
			}
		}
	}
	return out
}
