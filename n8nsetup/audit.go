package n8nsetup

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// Finding is one node of a workflow that writes to another system (or
// that the audit cannot classify), and whether the guard covers it.
type Finding struct {
	WorkflowID string `json:"workflow_id"`
	Workflow   string `json:"workflow"`
	// Version is which version of a 2.x workflow was read: "published" or
	// "draft" (unpublished edits); empty when there is only one.
	Version string `json:"version,omitempty"`
	Node    string `json:"node"`
	Type    string `json:"type"`
	Classification
	Guarded bool `json:"guarded"`
	// Problems say what is missing for the node to be guarded.
	Problems []string `json:"problems,omitempty"`
	// Fix is the command or the change by hand that guards it.
	Fix string `json:"fix,omitempty"`
}

// Unguarded: a write or an unclassified node the guard does not cover.
func (f Finding) Unguarded() bool { return !f.Guarded }

// Snapshot is one version of a workflow as the audit reads it.
type Snapshot struct {
	ID, Name, Version string
	Nodes             []map[string]any
	Connections       map[string]any
	Settings          map[string]any
}

// AuditSnapshot lists every node of w that writes to another system or
// that the audit does not know, with what keeps it from being guarded.
// errorHandlers are the ids of the guard's error workflows on the
// instance.
func AuditSnapshot(w Snapshot, errorHandlers map[string]bool) []Finding {
	g := newGraph(w.Nodes, w.Connections)
	var out []Finding
	for _, name := range g.order {
		n := g.nodes[name]
		if disabled(n) {
			continue
		}
		c := Classify(n)
		if c.Effect != Write && c.Effect != Unclassified {
			continue
		}
		f := Finding{WorkflowID: w.ID, Workflow: w.Name, Version: w.Version, Node: name, Type: nodeType(n), Classification: c}
		f.Problems = g.unguardedBecause(name, w.Settings, errorHandlers)
		f.Guarded = len(f.Problems) == 0
		if !f.Guarded {
			f.Fix = fix(w, name, f.Problems)
		}
		out = append(out, f)
	}
	return out
}

// Problems the fix tells apart.
const (
	problemNoReserve      = "no reserve of n8n-guard on the path from %s to it"
	problemNoReserveAtAll = "no reserve of n8n-guard in front of it"
	problemErrorWorkflow  = "the workflow's error workflow is not n8n-guard's"
)

// unguardedBecause lists what keeps target from being guarded, none when
// it is: a reserve on every path from a start to it whose answer it
// proceeds on only, a complete after it, its failure classified and
// failed, a stable key, and the guard's error workflow.
func (g *graph) unguardedBecause(target string, settings map[string]any, errorHandlers map[string]bool) []string {
	var why []string
	isReserve := func(name string) bool { return isGuardOp(g.nodes[name], "reserve") }
	for _, s := range g.starts() {
		if s != target && g.reaches([]string{s}, target, nil, isReserve) {
			why = append(why, fmt.Sprintf(problemNoReserve, s))
		}
	}
	reserves := []string{}
	for _, a := range g.ancestors(target) {
		if isReserve(a) {
			reserves = append(reserves, a)
		}
	}
	for _, r := range reserves {
		if g.reachesWithoutProceed(r, target) {
			why = append(why, fmt.Sprintf("it runs also when the reserve %q does not answer proceed: branch on body.proceed (If) or use the node's Proceed output", r))
		}
		if k := g.reserveKey(r); unstableKey(k) {
			why = append(why, fmt.Sprintf("the key of %q (%s) is not stable: every copy of an event would get a new one; use the event's own id", r, strings.TrimSpace(k)))
		}
	}
	if len(reserves) > 0 {
		why = append(why, g.outcomeProblems(target)...)
	} else if len(why) == 0 {
		why = append(why, problemNoReserveAtAll)
	}
	if id, _ := settings["errorWorkflow"].(string); !errorHandlers[id] {
		why = append(why, problemErrorWorkflow)
	}
	return why
}

// reachesWithoutProceed: target can be reached from reserve r by an
// answer that is not "proceed": the community node's other outputs, or an
// HTTP reserve's answer that passes no If/Switch on proceed (whose true
// branch alone counts), or the reserve's error output.
func (g *graph) reachesWithoutProceed(r, target string) bool {
	// Any reserve ends a path, r itself included: a path back into r (the
	// community node's Parked → Wait → Reserve, as its README wires
	// parking) is decided by r again and goes around nothing.
	stopAtReserve := func(name string) bool { return isGuardOp(g.nodes[name], "reserve") }
	if n8n.IsCommunityGuard(g.nodes[r]) {
		seeds := g.successors(r, func(o int) bool { return o > 0 })
		return g.reaches(seeds, target, nil, stopAtReserve)
	}
	expand := func(name string) func(int) bool {
		if isProceedGate(g.nodes[name]) {
			return func(o int) bool { return o > 0 }
		}
		return nil
	}
	return g.reaches(g.successors(r, nil), target, expand, stopAtReserve)
}

// isProceedGate: an If, Switch or Filter that looks at the reserve's
// proceed or outcome.
func isProceedGate(n map[string]any) bool {
	switch nodeType(n) {
	case "n8n-nodes-base.if", "n8n-nodes-base.switch", "n8n-nodes-base.filter":
	default:
		return false
	}
	b, _ := json.Marshal(params(n))
	s := string(b)
	return strings.Contains(s, "proceed") || strings.Contains(s, "accepted")
}

// outcomeProblems: after target a complete, and its failure reaches a
// fail with a reason (which may park) instead of stopping the execution.
func (g *graph) outcomeProblems(target string) []string {
	n := g.nodes[target]
	stop := func(name string) bool { return isGuardOp(g.nodes[name], "reserve") }
	var why []string
	success := g.successors(target, func(o int) bool { return o == 0 })
	if !g.reachesOp(success, "complete", stop) {
		why = append(why, "nothing completes the key after it: add a complete on its success path")
	}
	neverError := strings.Contains(mustJSON(params(n)), `"neverError":true`)
	failSeeds := g.successors(target, func(o int) bool { return o == 1 })
	if neverError {
		failSeeds = g.successors(target, nil)
	}
	switch {
	case str(n, "onError") != "continueErrorOutput" && !neverError:
		why = append(why, "its failure stops the execution with the key reserved (it goes unknown when the lease runs out): set On Error to the error output and fail the key there with a reason")
	case !g.reachesFailWithReason(failSeeds, stop):
		why = append(why, "its error path does not fail the key with a reason")
	}
	return why
}

func (g *graph) reachesOp(seeds []string, op string, stop func(string) bool) bool {
	for name := range g.nodes {
		if isGuardOp(g.nodes[name], op) && g.reaches(seeds, name, nil, stop) {
			return true
		}
	}
	return false
}

func (g *graph) reachesFailWithReason(seeds []string, stop func(string) bool) bool {
	for name, n := range g.nodes {
		if !isGuardOp(n, "fail") || !g.reaches(seeds, name, nil, stop) {
			continue
		}
		if n8n.IsCommunityGuard(n) || strings.Contains(str(params(n), "jsonBody"), "reason") {
			return true
		}
	}
	return false
}

// unstableKey: a key made by n8n (the time, a random value, the
// execution) differs for every copy of one event.
var unstableKey = regexp.MustCompile(`\$now|\$today|Date\.now|new Date|Math\.random|randomUUID|uuid|\$execution\.id|\$runIndex`).MatchString

// reserveKey is the key expression a reserve sends: the community node's
// Key, or the key member of an HTTP reserve's JSON body; a key read from
// $json comes from a Set node before it, whose assignment is added.
func (g *graph) reserveKey(r string) string {
	n := g.nodes[r]
	p := params(n)
	key := str(p, "key")
	if !n8n.IsCommunityGuard(n) {
		key = jsMember(str(p, "jsonBody"), "key")
	}
	if strings.Contains(key, "$json.key") || strings.Contains(key, "$json['key']") {
		for _, a := range g.ancestors(r) {
			for _, as := range setAssignments(g.nodes[a]) {
				if as["name"] == "key" {
					key += " " + fmt.Sprint(as["value"])
				}
			}
		}
	}
	return key
}

// jsMember is the expression after `name:` in a JavaScript object literal,
// up to the comma or brace that ends it.
func jsMember(src, name string) string {
	loc := regexp.MustCompile(`[{,\s]` + regexp.QuoteMeta(name) + `\s*:`).FindStringIndex(src)
	if loc == nil {
		return ""
	}
	depth, quote := 0, rune(0)
	rest := src[loc[1]:]
	for i, c := range rest {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case (c == ')' || c == ']' || c == '}') && depth > 0:
			depth--
		case (c == ',' || c == '}') && depth == 0:
			return rest[:i]
		}
	}
	return rest
}

func setAssignments(n map[string]any) []map[string]any {
	if nodeType(n) != "n8n-nodes-base.set" {
		return nil
	}
	return workflows.Assignments(n)
}

// fix is what guards a node: the guard command when no reserve is in
// front of it, setup when only the error workflow is missing, else the
// change by hand.
func fix(w Snapshot, node string, problems []string) string {
	noReserve := false
	for _, p := range problems {
		if strings.HasPrefix(p, "no reserve of n8n-guard") {
			noReserve = true
		}
	}
	switch {
	case noReserve:
		return fmt.Sprintf("n8n-guard n8n guard --workflow %s --node %s --key '<expression of the event id, e.g. $json.body.id>'", w.ID, shellQuote(node))
	case len(problems) == 1 && problems[0] == problemErrorWorkflow:
		return "n8n-guard n8n setup (makes n8n-guard's error handler this workflow's error workflow)"
	}
	return "by hand in the editor: " + strings.Join(problems, "; ")
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
