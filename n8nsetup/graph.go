package n8nsetup

import (
	"encoding/json"
	"sort"
)

// graph is a workflow's nodes and main connections, read once so that the
// audit and the rewrite ask the same questions of the same edges.
type graph struct {
	nodes map[string]map[string]any
	order []string // node names in the workflow's order
	// out[name][output] lists the nodes that output feeds.
	out map[string][][]edge
	// in[name] lists the edges into a node.
	in map[string][]edge
}

// edge is one main connection: from a node's output to a node's input.
type edge struct {
	From   string
	Output int
	To     string
	Input  int
}

func newGraph(nodes []map[string]any, connections map[string]any) *graph {
	g := &graph{nodes: map[string]map[string]any{}, out: map[string][][]edge{}, in: map[string][]edge{}}
	for _, n := range nodes {
		name, _ := n["name"].(string)
		g.nodes[name] = n
		g.order = append(g.order, name)
	}
	// Connections decode as generic JSON; a round trip gives them one shape.
	var conns map[string]struct {
		Main [][]struct {
			Node  string `json:"node"`
			Index int    `json:"index"`
		} `json:"main"`
	}
	b, _ := json.Marshal(connections)
	_ = json.Unmarshal(b, &conns)
	froms := make([]string, 0, len(conns))
	for from := range conns {
		froms = append(froms, from)
	}
	sort.Strings(froms)
	for _, from := range froms {
		outs := conns[from].Main
		g.out[from] = make([][]edge, len(outs))
		for o, targets := range outs {
			for _, t := range targets {
				e := edge{From: from, Output: o, To: t.Node, Input: t.Index}
				g.out[from][o] = append(g.out[from][o], e)
				g.in[t.Node] = append(g.in[t.Node], e)
			}
		}
	}
	return g
}

// successors are the nodes fed by the given outputs of name (all outputs
// when outputs is nil).
func (g *graph) successors(name string, outputs func(int) bool) []string {
	var next []string
	for o, edges := range g.out[name] {
		if outputs != nil && !outputs(o) {
			continue
		}
		for _, e := range edges {
			next = append(next, e.To)
		}
	}
	return next
}

// reaches walks forward from the seeds and tells whether target is
// reached. expand says which outputs of a visited node are followed
// (nil: all); stop ends the walk at a node (it is visited, not passed).
func (g *graph) reaches(seeds []string, target string, expand func(string) func(int) bool, stop func(string) bool) bool {
	seen := map[string]bool{}
	queue := append([]string(nil), seeds...)
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n == target {
			return true
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		if stop != nil && stop(n) {
			continue
		}
		var outs func(int) bool
		if expand != nil {
			outs = expand(n)
		}
		queue = append(queue, g.successors(n, outs)...)
	}
	return false
}

// ancestors are the nodes from which name can be reached.
func (g *graph) ancestors(name string) []string {
	seen := map[string]bool{}
	queue := []string{name}
	var out []string
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, e := range g.in[n] {
			if !seen[e.From] {
				seen[e.From] = true
				out = append(out, e.From)
				queue = append(queue, e.From)
			}
		}
	}
	sort.Strings(out)
	return out
}

// starts are the nodes an execution begins at: triggers, and any node
// nothing feeds (a workflow someone runs by hand from there).
func (g *graph) starts() []string {
	var out []string
	for _, name := range g.order {
		n := g.nodes[name]
		if nodeType(n) == "n8n-nodes-base.stickyNote" || disabled(n) {
			continue
		}
		if isTrigger(n) || len(g.in[name]) == 0 {
			out = append(out, name)
		}
	}
	return out
}

func nodeType(n map[string]any) string { s, _ := n["type"].(string); return s }

func params(n map[string]any) map[string]any {
	p, _ := n["parameters"].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	return p
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func disabled(n map[string]any) bool { d, _ := n["disabled"].(bool); return d }
