package n8nsetup

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/rerun"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// GuardSpec is what `n8n guard` puts in front of one node.
type GuardSpec struct {
	// Node is the name of the node that writes.
	Node string
	// Key is the JavaScript expression of the event's own id, evaluated on
	// the item the node gets (e.g. $json.body.event_id; {{ … }} is taken off).
	Key string
	// Namespace and Destination: empty takes DefaultNamespace and
	// DefaultDestination.
	Namespace, Destination string
	// Park: while the destination is paused the execution waits in a Wait
	// node until the guard resumes it, instead of ending.
	Park bool
	// GuardURL is where n8n reaches the guard.
	GuardURL string
	// NodeType, when set, is the community node's type in this n8n
	// (CommunityNodeType, or CustomNodeType from a custom extensions
	// folder): the guard is placed with the community node instead of the
	// HTTP templates.
	NodeType string
	// Credential is the guard's API token credential (with NodeType the
	// community node's, type n8nGuardApi); Resume the Wait node's (parking
	// only).
	Credential, Resume guardCredential
	// ErrorHandler is the guard's error workflow, made the workflow's
	// error workflow when it names another or none ("" leaves it).
	ErrorHandler string
}

// Rewrite is a workflow with the guard in front of one node.
type Rewrite struct {
	Nodes       []map[string]any
	Connections map[string]any
	Settings    map[string]any
	// Changes say what was added or changed, none when it was guarded.
	Changes []string
}

// Refusal is a shape the rewrite cannot guard safely, with the reason and
// the recipe to do it by hand.
type Refusal struct{ Node, Reason string }

func (r *Refusal) Error() string {
	return fmt.Sprintf("node %q cannot be guarded automatically: %s. By hand: %s", r.Node, r.Reason, ManualRecipe)
}

// ManualRecipe is how a node is guarded by hand.
const ManualRecipe = "paste workflows/templates/reserve.json in front of the node (namespace, key: the event's own id, destination), " +
	"an If on {{ $json.body.proceed }} whose true branch alone leads to the node, complete.json after it, and on its error output " +
	"(On Error: Continue (using error output)) the failure classified as in docs/n8n.md (\"The target's answer is classified\") and fail.json; " +
	"see docs/n8n.md, \"Guard an existing workflow\""

// GatePrefix begins the name of every re-run gate the rewrite adds
// (rerun.GateNodePrefix).
const GatePrefix = rerun.GateNodePrefix

// The names of the nodes the rewrite adds, from the guarded node's name.
func guardNames(node string) map[string]string {
	return map[string]string{
		"reserve":    n8n.ReserveNodePrefix + node, // what a re-run reads the gate's keys from
		"proceed":    "n8n-guard: proceed with " + node + "?",
		"item":       "n8n-guard: item for " + node,
		"complete":   "n8n-guard: complete " + node,
		"output":     "n8n-guard: output of " + node,
		"classify":   "n8n-guard: classify failure of " + node,
		"fail":       "n8n-guard: fail " + node,
		"failed":     "n8n-guard: " + node + " failed",
		"rerunnable": "n8n-guard: may " + node + " be re-run?",
		"gate":       GatePrefix + node,
		"decided":    "n8n-guard: decided on " + node + "?",
		"answer":     "n8n-guard: answer, " + node + " not written",
		"undecided":  "n8n-guard: no decision for " + node,
		"parked":     "n8n-guard: parked before " + node + "?",
		"failParked": "n8n-guard: failure of " + node + " parked?",
		"wait":       "n8n-guard: wait for " + node + " catch-up",
		"restore":    "n8n-guard: items for " + node + " after the catch-up",
	}
}

// DefaultNamespace is the workflow's and the node's name as a guard
// namespace: lower case, [a-z0-9._-], at most 64 characters.
func DefaultNamespace(workflow, node string) string {
	return slug(workflow+"."+node, 64)
}

// DefaultDestination is the host the node writes to (its URL when fixed),
// else its node type: the breaker is per destination.
func DefaultDestination(n map[string]any) string {
	if u, err := url.Parse(str(params(n), "url")); err == nil && u.Host != "" && !isExpression(str(params(n), "url")) {
		return slug(u.Hostname(), 64)
	}
	t := nodeType(n)
	return slug(t[strings.LastIndex(t, ".")+1:], 64)
}

var notSlug = regexp.MustCompile(`[^a-z0-9._-]+`)

func slug(s string, max int) string {
	s = strings.Trim(notSlug.ReplaceAllString(strings.ToLower(s), "-"), "-._")
	s = strings.NewReplacer("-.", ".", ".-", ".").Replace(s)
	if len(s) > max {
		s = strings.TrimRight(s[:max], "-._")
	}
	if s == "" {
		s = "n8n"
	}
	return s
}

// KeyExpression is the JavaScript of a key given as an n8n expression
// ("={{ … }}", "{{ … }}") or as JavaScript; it refuses keys that differ
// for every copy of one event.
func KeyExpression(key string) (string, error) {
	k := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(key), "="))
	if strings.HasPrefix(k, "{{") && strings.HasSuffix(k, "}}") {
		k = strings.TrimSpace(k[2 : len(k)-2])
	}
	switch {
	case k == "":
		return "", fmt.Errorf("--key is empty: give the expression of the event's own id, e.g. $json.body.event_id")
	case unstableKey(k):
		return "", fmt.Errorf("--key %s is not stable: every copy of an event would get a new key (the time, a random value or the execution); use the event's own id", k)
	case strings.Contains(k, "{{") || strings.Contains(k, "}}"):
		return "", fmt.Errorf("--key %s: give one expression, e.g. $json.body.event_id", k)
	}
	return k, nil
}

// PlanGuard rewrites w so that spec.Node is guarded: reserve in front of
// it, an If on proceed, the node's own item restored, complete after it,
// its error output classified (the shipped templates' rules) and failed,
// a Respond node answering copies when a webhook waits for an answer, and
// with Park a Wait node; with spec.NodeType the community node does the
// reserve (its Proceed output), complete and fail (buildCommunity). A node that is guarded already gives no changes
// (a second run changes nothing); a shape that cannot be rewritten safely
// is a *Refusal.
func PlanGuard(w Snapshot, spec GuardSpec, handlers map[string]bool) (*Rewrite, error) {
	var rw Rewrite
	b, _ := json.Marshal(w)
	var c Snapshot
	_ = json.Unmarshal(b, &c) // a deep copy: w stays as read
	if c.Connections == nil {
		c.Connections = map[string]any{}
	}
	if c.Settings == nil {
		c.Settings = map[string]any{}
	}
	rw.Nodes, rw.Connections, rw.Settings = c.Nodes, c.Connections, c.Settings
	g := newGraph(c.Nodes, c.Connections)
	target, ok := g.nodes[spec.Node]
	if !ok {
		return nil, fmt.Errorf("workflow %s %q has no node %q", w.ID, w.Name, spec.Node)
	}
	names := guardNames(spec.Node)
	if spec.ErrorHandler != "" {
		if id, _ := rw.Settings["errorWorkflow"].(string); !handlers[id] {
			rw.Settings["errorWorkflow"] = spec.ErrorHandler
			rw.Changes = append(rw.Changes, "make n8n-guard's error handler the workflow's error workflow")
		}
	}
	if _, done := g.nodes[names["reserve"]]; done {
		return &rw, nil // rewritten before: only the settings may change
	}
	if err := g.refuse(spec.Node, target); err != nil {
		return nil, err
	}
	key, err := KeyExpression(spec.Key)
	if err != nil {
		return nil, err
	}
	ns := spec.Namespace
	if ns == "" {
		ns = DefaultNamespace(w.Name, spec.Node)
	}
	dest := spec.Destination
	if dest == "" {
		dest = DefaultDestination(target)
	}
	if slug(ns, 64) != ns || slug(dest, 64) != dest {
		return nil, fmt.Errorf("namespace %q and destination %q must be lower case [a-z0-9._-], at most 64 characters", ns, dest)
	}
	if spec.GuardURL == "" && spec.NodeType == "" {
		return nil, fmt.Errorf("no guard URL: give --guard-url (where n8n reaches n8n-guard), or run `n8n-guard n8n setup --guard-url …` first")
	}
	if spec.Park && responds(g, spec.Node) {
		return nil, &Refusal{Node: spec.Node, Reason: "--park with a webhook that answers through Respond to Webhook: a resumed execution would answer a second time; gate every Respond node on the Wait node (docs/n8n.md, \"Never a second answer\") and wire the parking by hand, or guard without --park"}
	}
	b2 := &builder{rw: &rw, wfID: w.ID, at: position(target), names: names, spec: spec}
	build := b2.build
	if spec.NodeType != "" {
		build = b2.buildCommunity
	}
	if err := build(g, target, key, ns, dest); err != nil {
		return nil, err
	}
	return &rw, nil
}

// refuse says why target cannot be rewritten safely, nil when it can.
func (g *graph) refuse(name string, target map[string]any) error {
	no := func(format string, args ...any) error {
		return &Refusal{Node: name, Reason: fmt.Sprintf(format, args...)}
	}
	switch c := Classify(target); {
	case isTrigger(target):
		return no("it is a trigger")
	case c.Effect == Guard:
		return no("it is n8n-guard's own node")
	case c.Effect == Read || c.Effect == Internal:
		return no("it does not write to another system (%s %s)", c.Effect, c.Operation)
	}
	for _, s := range g.starts() {
		if nodeType(g.nodes[s]) == "n8n-nodes-base.executeWorkflowTrigger" {
			return no("the workflow is a sub-workflow (Execute Workflow Trigger %q): its items and their keys come from the calling workflow, which must reserve before it calls", s)
		}
	}
	in := g.in[name]
	switch {
	case len(in) == 0:
		return no("nothing leads into it")
	case len(in) > 1:
		return no("%d inputs lead into it (from %s and %s): each path needs its own reserve", len(in), in[0].From, in[1].From)
	case g.reaches(g.successors(name, nil), name, nil, nil):
		return no("its output loops back into it (a Loop Over Items or a connection back): the key and the retry of each round need wiring by hand")
	case str(target, "onError") != "" && str(target, "onError") != "stopWorkflow":
		return no("it handles its own failures (On Error: %s)", str(target, "onError"))
	case len(g.out[name]) > 1:
		return no("it has %d outputs", len(g.out[name]))
	}
	return nil
}

// builder adds the guard's nodes around one target node.
type builder struct {
	rw    *Rewrite
	wfID  string
	at    [2]float64
	names map[string]string
	spec  GuardSpec
}

func position(n map[string]any) [2]float64 {
	var p [2]float64
	if xy, ok := n["position"].([]any); ok && len(xy) == 2 {
		p[0], _ = xy[0].(float64)
		p[1], _ = xy[1].(float64)
	}
	return p
}

// add puts a node in, named by its role, at an offset from the target.
func (b *builder) add(role string, n map[string]any, dx, dy float64) string {
	name := b.names[role]
	n["name"] = name
	n["id"] = stableID(b.wfID, name)
	n["position"] = []any{b.at[0] + dx, b.at[1] + dy}
	b.rw.Nodes = append(b.rw.Nodes, n)
	b.rw.Changes = append(b.rw.Changes, fmt.Sprintf("add node %q", name))
	return name
}

// stableID is a node id made from the workflow and node name, so that a
// dry run and a real one add the same.
func stableID(parts ...string) string {
	h := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func (b *builder) template(name, path, body string) (map[string]any, error) {
	n, err := workflows.Template(name)
	if err != nil {
		return nil, err
	}
	p := params(n)
	p["url"] = strings.TrimRight(b.spec.GuardURL, "/") + path
	p["jsonBody"] = body
	n["parameters"] = p
	n["credentials"] = map[string]any{workflows.CredentialType: map[string]any{"id": b.spec.Credential.ID, "name": b.spec.Credential.Name}}
	delete(n, "notes")
	return n, nil
}

func ifNode(condition string) map[string]any {
	return map[string]any{
		"type": "n8n-nodes-base.if", "typeVersion": 2.2,
		"parameters": map[string]any{
			"conditions": map[string]any{
				"options":    map[string]any{"caseSensitive": true, "leftValue": "", "typeValidation": "strict", "version": 2},
				"conditions": []any{map[string]any{"id": "c0", "leftValue": "={{ " + condition + " }}", "operator": map[string]any{"type": "boolean", "operation": "true", "singleValue": true}, "rightValue": ""}},
				"combinator": "and",
			},
			"options": map[string]any{},
		},
	}
}

func codeNode(js string) map[string]any {
	return map[string]any{"type": "n8n-nodes-base.code", "typeVersion": 2,
		"parameters": map[string]any{"mode": "runOnceForEachItem", "jsCode": js}}
}

// codeNodeAllItems is a Code node that runs once for all its items.
func codeNodeAllItems(js string) map[string]any {
	n := codeNode(js)
	n["parameters"].(map[string]any)["mode"] = "runOnceForAllItems"
	return n
}

func stopNode(message string) map[string]any {
	return map[string]any{"type": "n8n-nodes-base.stopAndError", "typeVersion": 1,
		"parameters": map[string]any{"errorType": "errorMessage", "errorMessage": message}}
}

// classifyJS sorts a write's failure by the shipped templates' rules
// (docs/n8n.md, "The target's answer is classified"): 502/504, a timeout
// or anything unclear may have written (outcome_unknown); other 5xx, 408
// and 429 did not (destination_failed); other 4xx refused the data
// (validation_failed); a refused connection or a name that does not
// resolve never reached it (destination_unreachable).
const classifyJS = `// n8n-guard: the failure of %s, classified as the shipped templates do.
const e = $json.error ?? $json;
const raw = JSON.stringify(e) || '';
const text = [e.message, e.description, ...(Array.isArray(e.messages) ? e.messages : [])].filter(Boolean).join(' ');
let status = Number(e.httpCode ?? e.statusCode ?? e.status ?? (e.cause || {}).status) || 0;
if (!(status >= 100 && status < 600)) {
  const m = /"(?:httpCode|statusCode|status)":"?(\d{3})\b/.exec(raw) || /^(\d{3}) - /.exec(String((e.messages || [])[0] || ''));
  status = m ? Number(m[1]) : 0;
}
let reason;
if (status === 502 || status === 504) reason = 'outcome_unknown';
else if (status === 408 || status === 429 || status >= 500) reason = 'destination_failed';
else if (status >= 400) reason = 'validation_failed';
else if (/ECONNREFUSED|refused the connection|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|certificate|self.signed|SSL routines/i.test(raw)) reason = 'destination_unreachable';
else reason = 'outcome_unknown';
return { json: { reason, message: (%s + ': ' + (status ? 'HTTP ' + status + ' ' : '') + text).slice(0, 500) } };
`

func (b *builder) build(g *graph, target map[string]any, key, ns, dest string) error {
	n := b.names
	name := b.spec.Node
	jsName, _ := json.Marshal(name)
	calls, err := b.calls(key, ns, dest)
	if err != nil {
		return err
	}
	// The items the target used to get, and the nodes it used to feed.
	in := g.in[name][0]
	var after []edge
	if len(g.out[name]) > 0 {
		after = g.out[name][0]
	}
	b.addNodes(calls, in, string(jsName))
	target["onError"] = "continueErrorOutput"
	b.rw.Changes = append(b.rw.Changes, fmt.Sprintf("set On Error of %q to its error output (classified and failed)", name))

	conns := b.rw.Connections
	link := func(from string, outputs ...[]string) { linkMain(conns, from, outputs...) }
	// The node that fed the target feeds the reserve instead.
	retarget(conns, in, n["reserve"])
	link(n["reserve"], []string{n["proceed"]}, []string{n["undecided"]})
	if b.spec.Park {
		if err := b.addParking(in, link); err != nil {
			return err
		}
	} else {
		link(n["fail"], []string{n["rerunnable"]})
	}
	// A retryable failure ends at the gate, not at the Stop node: n8n's
	// retry of the execution resumes at the node that failed, and the gate
	// reserves the key again once a person allowed the re-run.
	link(n["rerunnable"], []string{n["gate"]}, []string{n["failed"]})
	link(n["gate"], []string{n["proceed"]})
	link(n["proceed"], []string{n["item"]}, []string{n["decided"]})
	link(n["item"], []string{name})
	link(name, []string{n["complete"]}, []string{n["classify"]})
	link(n["classify"], []string{n["fail"]})
	b.outputAfter(name, string(jsName), after, link)
	link(n["decided"], b.decidedOutputs(g), []string{n["undecided"]})
	return nil
}

// guardCalls are the HTTP nodes of the calls to the guard.
type guardCalls struct{ reserve, gate, complete, fail map[string]any }

// reserveBody is the JSON body of a reserve: namespace and key are
// JavaScript, extra ends the object (destination, rerun, resume_url). The
// owner and request_id are of the current execution: a retry of it has a
// new id.
const reserveBody = "={{ JSON.stringify({ namespace: %s, key: %s, owner: 'n8n ' + $workflow.id + ' exec ' + $execution.id, request_id: ($execution.id + ':' + $nodeId + ':' + $runIndex + ':' + $itemIndex).slice(0, 128), destination: %s%s }) }}"

// calls makes the reserve (with its resume URL when parking), the re-run
// gate, complete and fail nodes from the shipped templates.
func (b *builder) calls(key, ns, dest string) (guardCalls, error) {
	n := b.names
	ref := func(node, field string) string {
		return fmt.Sprintf("$(%s).item.json.body.%s", jsString(node), field)
	}
	resume, tpl := "", "reserve"
	if b.spec.Park {
		resume, tpl = ", resume_url: $execution.resumeUrl", "reserve-park"
	}
	var c guardCalls
	var err error
	if c.reserve, err = b.template(tpl, "/v1/reserve", fmt.Sprintf(reserveBody,
		jsString(ns), "String(("+key+") ?? '')", jsString(dest), resume)); err != nil {
		return c, err
	}
	// The gate asks for the key the reserve answered for this item again,
	// as a re-run: 409 rerun_not_granted until a person allowed it, which
	// must fail the node (no neverError, no error output) so that the
	// execution fails here and n8n's retry resumes here.
	if c.gate, err = b.template(tpl, "/v1/reserve", fmt.Sprintf(reserveBody,
		ref(n["reserve"], "namespace"), ref(n["reserve"], "key"), jsString(dest), ", rerun: true"+resume)); err != nil {
		return c, err
	}
	delete(c.gate, "onError")
	opts, _ := params(c.gate)["options"].(map[string]any)
	resp, _ := opts["response"].(map[string]any)
	full, _ := resp["response"].(map[string]any)
	delete(full, "neverError") // fullResponse stays: the proceed If reads $json.statusCode and $json.body
	// The token is the one of the answer that let the node write: the
	// reserve's, or in a re-run the gate's; the proceed If hands on either.
	ids := fmt.Sprintf("namespace: %s, key: %s, token: %s", ref(n["proceed"], "namespace"), ref(n["proceed"], "key"), ref(n["proceed"], "token"))
	if c.complete, err = b.template("complete", "/v1/complete", "={{ JSON.stringify({ "+ids+", result_ref: String($json.id ?? ($json.body || {}).id ?? '').slice(0, 512) }) }}"); err != nil {
		return c, err
	}
	failResume := ""
	if b.spec.Park {
		failResume = ", resume_url: ['destination_unreachable', 'destination_failed'].includes($json.reason) ? $execution.resumeUrl : undefined"
	}
	c.fail, err = b.template("fail", "/v1/fail", "={{ JSON.stringify({ "+ids+", reason: $json.reason, message: $json.message"+failResume+" }) }}")
	return c, err
}

// addNodes adds the nodes around the target every guard has: the calls,
// the If that lets only "proceed" through, the item handed on, the
// classification of its errors and the stops. in is the edge that fed the
// target, jsName its name as a JSON string.
func (b *builder) addNodes(c guardCalls, in edge, jsName string) {
	n, name := b.names, b.spec.Node
	b.add("reserve", c.reserve, -660, 0)
	b.add("proceed", ifNode("$json.statusCode === 200 && ($json.body || {}).proceed === true"), -440, 0)
	itemJS := fmt.Sprintf("// n8n-guard: %s gets the item it got before the reserve.\nconst src = $(%s).item;\nreturn src.binary ? { json: src.json, binary: src.binary } : { json: src.json };\n", jsString(name), jsString(in.From))
	if b.spec.Park {
		// After a catch-up the reserve is fed by the restore node (the
		// Wait node hands on n8n's resume call, not the items).
		itemJS = fmt.Sprintf("// n8n-guard: %s gets the item it got before the reserve (after a catch-up, the item restored).\nlet src;\ntry { src = $(%s).item; } catch (e) { src = undefined; }\nif (!src) src = $(%s).item;\nreturn src.binary ? { json: src.json, binary: src.binary } : { json: src.json };\n", jsString(name), jsString(n["restore"]), jsString(in.From))
	}
	b.add("item", codeNode(itemJS), -220, 0)
	b.add("complete", c.complete, 220, -160)
	b.add("classify", codeNode(fmt.Sprintf(classifyJS, jsName, jsName)), 220, 160)
	b.add("fail", c.fail, 440, 160)
	// The gate above the Stop node: n8n's v1 execution order runs the
	// upper branch first, so a retryable failure fails at the gate even
	// when other items of the execution stop.
	b.add("rerunnable", ifNode("$json.outcome === 'destination_failed'"), 880, 160)
	b.add("gate", c.gate, 1100, 40)
	b.add("failed", stopNode(fmt.Sprintf("=%s failed ({{ $(%s).item.json.reason }}): {{ $(%s).item.json.message }}", exprText(name), jsString(n["classify"]), jsString(n["classify"]))), 1100, 280)
	b.add("decided", ifNode("$json.statusCode === 200 && ($json.body || {}).outcome !== undefined"), -220, 320)
	b.add("undecided", stopNode("=n8n-guard did not decide on "+exprText(name)+" (HTTP {{ $json.statusCode }} {{ ($json.body || {}).code || $json.error && $json.error.message || '' }}): nothing was written"), 0, 480)
}

// addParking adds and links the nodes of parking: a parked answer waits
// in a Wait node the guard resumes, and so does a failure that may park;
// after the catch-up the items are restored and reserved again.
func (b *builder) addParking(in edge, link func(from string, outputs ...[]string)) error {
	n, name := b.names, b.spec.Node
	b.add("parked", ifNode("($json.body || {}).outcome === 'parked' && $json.body.resume_url === $execution.resumeUrl"), 0, 640)
	wait, err := workflows.Template("wait")
	if err != nil {
		return err
	}
	delete(wait, "notes")
	wait["webhookId"] = stableID(b.wfID, n["wait"], "webhook")
	wait["credentials"] = map[string]any{workflows.CredentialType: map[string]any{"id": b.spec.Resume.ID, "name": b.spec.Resume.Name}}
	b.add("wait", wait, 220, 640)
	b.add("failParked", ifNode("$json.outcome === 'parked'"), 660, 160)
	// The Wait node hands on n8n's resume call, one item, not the
	// items that parked (several of one execution park behind one
	// Wait node): every item that reached the reserve is reserved
	// again; the ones written already answer duplicate_event.
	b.add("restore", codeNodeAllItems(fmt.Sprintf("// n8n-guard: the items that reached %s before the catch-up, reserved again (the written ones answer duplicate_event).\nreturn $(%s).all().map((it) => (it.binary ? { json: it.json, binary: it.binary } : { json: it.json }));\n", jsString(name), jsString(in.From))), 440, 640)
	link(n["wait"], []string{n["restore"]})
	link(n["restore"], []string{n["reserve"]})
	link(n["parked"], []string{n["wait"]})
	link(n["fail"], []string{n["failParked"]})
	link(n["failParked"], []string{n["wait"]}, []string{n["rerunnable"]})
	return nil
}

// decidedOutputs are the nodes a decided reserve goes to: the answer to a
// sender that waits for one, and the parking check.
func (b *builder) decidedOutputs(g *graph) []string {
	n := b.names
	decided := []string{}
	if responds(g, b.spec.Node) {
		// The sender waits for an answer (Respond to Webhook): a copy of the
		// event is told duplicate_event / in_progress instead of n8n's error.
		b.add("answer", map[string]any{"type": "n8n-nodes-base.respondToWebhook", "typeVersion": 1.1, "parameters": map[string]any{
			"respondWith":  "json",
			"responseBody": "={{ JSON.stringify({ code: $json.body.outcome, key: $json.body.key ?? null, result_ref: $json.body.result_ref ?? null, message: $json.body.message ?? null }) }}",
			"options":      map[string]any{"responseCode": "={{ ({ duplicate_event: 200, in_progress: 409, state_unknown: 202, rejected: 422, destination_paused: 503, parked: 202 })[$json.body.outcome] ?? 409 }}"},
		}}, 0, 320)
		decided = append(decided, n["answer"])
	}
	if b.spec.Park {
		decided = append(decided, n["parked"])
	}
	return decided
}

// retarget points the connection e at node to.
func retarget(conns map[string]any, e edge, to string) {
	from, _ := conns[e.From].(map[string]any)
	main, _ := from["main"].([]any)
	targets, _ := main[e.Output].([]any)
	for _, t := range targets {
		if m, ok := t.(map[string]any); ok && m["node"] == e.To {
			m["node"] = to
			m["index"] = 0
		}
	}
}

// responds: a webhook before the node answers with a Respond to Webhook
// node (responseMode responseNode), so a copy must be answered too.
func responds(g *graph, name string) bool {
	for _, a := range g.ancestors(name) {
		n := g.nodes[a]
		if nodeType(n) == "n8n-nodes-base.webhook" && str(params(n), "responseMode") == "responseNode" {
			return true
		}
	}
	return false
}

// jsString is s as a single-quoted JavaScript string literal. A node's
// name goes into generated code only so, in comments as well: a raw line
// break (\n, \r, U+2028, U+2029, all escaped by encoding/json) would end
// a // comment and make the rest of the name code. Braces are escaped
// too, so that the literal can stand inside an n8n expression's {{ }}: a
// "}}" in a name would end the expression there.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return "'" + jsEscapes.Replace(string(b[1:len(b)-1])) + "'"
}

var jsEscapes = strings.NewReplacer(`\\`, `\\`, `\"`, `"`, "'", `\'`, "{", `\x7b`, "}", `\x7d`)

// exprText is s as literal text of an n8n expression ("=… {{ … }} …"): a
// string inside {{ }}, so that a name holding "{{ $env.X }}" is shown,
// never evaluated.
func exprText(s string) string { return "{{ " + jsString(s) + " }}" }

// linkMain sets from's main outputs in conns: outputs[i] are the nodes
// output i leads to (none: an empty output).
func linkMain(conns map[string]any, from string, outputs ...[]string) {
	var main []any
	for _, targets := range outputs {
		out := []any{}
		for _, to := range targets {
			out = append(out, map[string]any{"node": to, "type": "main", "index": 0})
		}
		main = append(main, out)
	}
	conns[from] = map[string]any{"main": main}
}

// outputAfter hands the guarded node's output, not the guard's answer,
// to the nodes that came after it (after): a Code node behind Complete
// takes the node's item and feeds them. quoted is name as a JavaScript
// string literal, as each rewrite has always written it (a second run
// compares the code and must find it unchanged).
func (b *builder) outputAfter(name, quoted string, after []edge, link func(from string, outputs ...[]string)) {
	if len(after) == 0 {
		return
	}
	n := b.names
	b.add("output", codeNode(fmt.Sprintf("// n8n-guard: the nodes after %s get its output, not the guard's answer.\nconst src = $(%s).item;\nreturn src.binary ? { json: src.json, binary: src.binary } : { json: src.json };\n", jsString(name), quoted)), 440, -160)
	link(n["complete"], []string{n["output"]})
	var outs []any
	for _, e := range after {
		outs = append(outs, map[string]any{"node": e.To, "type": "main", "index": e.Input})
	}
	b.rw.Connections[n["output"]] = map[string]any{"main": []any{outs}}
}
