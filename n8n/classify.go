package n8n

import (
	"fmt"
	"strings"
)

// Effect is what a node does to other systems, as far as its type and
// parameters tell.
type Effect string

const (
	// Internal nodes move data inside n8n: no other system sees them.
	Internal Effect = "internal"
	// Read nodes only ask another system.
	Read Effect = "read"
	// Write nodes change another system: each one needs the guard.
	Write Effect = "write"
	// Unclassified nodes are ones the audit does not know: reported, never
	// taken for safe.
	Unclassified Effect = "unclassified"
	// Guard nodes are n8n-guard's own calls (reserve, complete, fail, …).
	Guard Effect = "guard"
)

// Classification is a node's effect and why.
type Classification struct {
	Effect Effect `json:"effect"`
	// Operation is what the node was found to do, e.g. "POST",
	// "contact/upsert", "executeQuery".
	Operation string `json:"operation,omitempty"`
	Why       string `json:"why,omitempty"`
}

// appNode is what the audit knows of an app node of n8n-nodes-base: the
// operation its parameters name, and the one n8n uses when the parameter
// is absent (n8n leaves defaults out of a workflow's JSON). An empty
// default means it differs by resource or version: the node is then
// unclassified.
type appNode struct{ defaultOp string }

// appNodes are the most used app nodes, by n8n's type name.
var appNodes = map[string]appNode{
	"n8n-nodes-base.hubspot":      {},
	"n8n-nodes-base.salesforce":   {},
	"n8n-nodes-base.pipedrive":    {},
	"n8n-nodes-base.gmail":        {defaultOp: "send"},
	"n8n-nodes-base.emailSend":    {defaultOp: "send"},
	"n8n-nodes-base.slack":        {defaultOp: "post"},
	"n8n-nodes-base.telegram":     {defaultOp: "sendMessage"},
	"n8n-nodes-base.postgres":     {defaultOp: "insert"},
	"n8n-nodes-base.mySql":        {defaultOp: "insert"},
	"n8n-nodes-base.googleSheets": {},
	"n8n-nodes-base.airtable":     {},
	"n8n-nodes-base.notion":       {},
	"n8n-nodes-base.stripe":       {},
}

// readPrefixes are operation names that only ask: get, getAll, search,
// list, lookup, read, select and their relatives (getMany,
// getRecentlyCreatedUpdated, getPermalink, …).
var readPrefixes = []string{"get", "list", "search", "read", "lookup", "select", "find", "fetch", "download", "history"}

// internalNodes move or shape items inside n8n.
var internalNodes = baseNodes(
	"set", "if", "switch", "merge", "code", "function", "functionItem", "noOp", "splitInBatches",
	"splitOut", "itemLists", "filter", "aggregate", "sort", "limit", "removeDuplicates", "dateTime",
	"crypto", "html", "xml", "markdown", "wait", "respondToWebhook", "stopAndError", "executionData",
	"stickyNote", "compareDatasets", "renameKeys", "summarize", "compression", "convertToFile",
	"extractFromFile", "moveBinaryData", "debugHelper", "executeWorkflow", "jsonParse",
)

func baseNodes(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, t := range names {
		m["n8n-nodes-base."+t] = true
	}
	return m
}

// guardPaths are the guard's own API routes, which its HTTP templates call.
var guardPaths = []string{"/v1/reserve", "/v1/complete", "/v1/fail", "/v1/lookup", "/v1/resolve", "/v1/keys", "/v1/n8n/error"}

// Classify says what a node does to other systems.
func Classify(n map[string]any) Classification {
	t, p := nodeType(n), params(n)
	switch {
	case isCommunityGuard(n):
		return Classification{Effect: Guard, Operation: guardOperation(n)}
	case t == "n8n-nodes-base.httpRequest":
		return classifyHTTP(n)
	case isTrigger(n):
		return Classification{Effect: Internal, Why: "trigger"}
	case internalNodes[t]:
		return Classification{Effect: Internal}
	}
	app, known := appNodes[t]
	if !known {
		return Classification{Effect: Unclassified, Why: fmt.Sprintf("the audit does not know node type %s: check by hand whether it writes", t)}
	}
	op := str(p, "operation")
	if isExpression(op) {
		return Classification{Effect: Write, Operation: op, Why: "the operation is an expression: taken for a write"}
	}
	if op == "" {
		op = app.defaultOp
	}
	if op == "" {
		return Classification{Effect: Unclassified, Why: "no operation set: n8n's default for this node depends on its resource and version"}
	}
	shown := op
	if r := str(p, "resource"); r != "" {
		shown = r + "/" + op
	}
	if isReadOperation(op) {
		return Classification{Effect: Read, Operation: shown}
	}
	return Classification{Effect: Write, Operation: shown}
}

func isReadOperation(op string) bool {
	op = strings.ToLower(op)
	for _, p := range readPrefixes {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

// classifyHTTP: a method other than GET, HEAD or OPTIONS writes. Version 1
// names it requestMethod; every version defaults to GET.
func classifyHTTP(n map[string]any) Classification {
	p := params(n)
	if isGuardURL(str(p, "url")) {
		return Classification{Effect: Guard, Operation: guardOperation(n)}
	}
	method := str(p, "method")
	if method == "" {
		method = str(p, "requestMethod")
	}
	if method == "" {
		method = "GET"
	}
	switch {
	case isExpression(method):
		return Classification{Effect: Write, Operation: method, Why: "the method is an expression: taken for a write"}
	case method == "GET" || method == "HEAD" || method == "OPTIONS":
		return Classification{Effect: Read, Operation: method}
	}
	return Classification{Effect: Write, Operation: method}
}

func isGuardURL(u string) bool {
	for _, p := range guardPaths {
		if strings.Contains(u, p) {
			return true
		}
	}
	return false
}

func isExpression(s string) bool { return strings.HasPrefix(s, "=") }

// isTrigger: n8n names every trigger node …Trigger, except these.
func isTrigger(n map[string]any) bool {
	t := nodeType(n)
	switch t {
	case "n8n-nodes-base.webhook", "n8n-nodes-base.cron", "n8n-nodes-base.interval", "n8n-nodes-base.start":
		return true
	}
	return strings.HasSuffix(t, "Trigger")
}

// isCommunityGuard: the community node, installed as a package
// (n8n-nodes-n8n-guard.n8nGuard) or as a custom extension (CUSTOM.n8nGuard).
func isCommunityGuard(n map[string]any) bool {
	return strings.HasSuffix(nodeType(n), ".n8nGuard")
}

// guardOperation is which of the guard's operations a guard node calls.
func guardOperation(n map[string]any) string {
	p := params(n)
	if isCommunityGuard(n) {
		if op := str(p, "operation"); op != "" {
			return op
		}
		return "reserve"
	}
	u := str(p, "url")
	for _, op := range []string{"reserve", "complete", "fail", "lookup", "resolve"} {
		if strings.Contains(u, "/v1/"+op) {
			return op
		}
	}
	return "other"
}

func isGuardOp(n map[string]any, op string) bool {
	return Classify(n).Effect == Guard && guardOperation(n) == op && !disabled(n)
}
