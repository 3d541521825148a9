package n8nsetup

import (
	"fmt"
	"strings"

	"github.com/n8n-guard/n8n-guard/n8n"
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

// appNode is what the audit knows of an app node of n8n-nodes-base. n8n
// leaves a parameter at its default out of a workflow's JSON, so a node
// without "resource" or "operation" does what the node's description sets
// as default for its typeVersion: versions says so for each group of
// typeVersions, as n8n's source has them. A typeVersion the audit does not
// know, or a resource without a known default, leaves such a node
// unclassified.
type appNode struct {
	versions []versionDefaults
	// reads are resource/operation pairs that only ask although their name
	// does not say so (see readPrefixes).
	reads map[string]bool
}

// versionDefaults are a node's defaults in some of its typeVersions.
type versionDefaults struct {
	typeVersions []float64
	// resource is the default resource; "" where these versions have no
	// resource parameter.
	resource string
	// ops is each resource's default operation ("" for no resource).
	ops map[string]string
}

func (a appNode) defaults(typeVersion float64) (versionDefaults, bool) {
	for _, d := range a.versions {
		for _, v := range d.typeVersions {
			if v == typeVersion {
				return d, true
			}
		}
	}
	return versionDefaults{}, false
}

func versions(vs ...float64) []float64 { return vs }

// appNodes are the most used app nodes, by n8n's type name. Their defaults
// are those of n8n-nodes-base 1.121 and 2.41 (n8n 1.x and 2.x): the
// "default" of each node's resource and operation parameters.
var appNodes = map[string]appNode{
	"n8n-nodes-base.hubspot": {versions: []versionDefaults{
		{versions(1), "deal", map[string]string{"contact": "upsert", "contactList": "add", "company": "create", "deal": "create", "engagement": "create", "form": "getFields", "ticket": "create"}},
		{versions(2, 2.1, 2.2), "contact", map[string]string{"contact": "upsert", "contactList": "add", "company": "create", "deal": "create", "engagement": "create", "ticket": "create"}},
	}},
	"n8n-nodes-base.salesforce": {versions: []versionDefaults{
		{versions(1, 1.1), "lead", map[string]string{"lead": "create", "contact": "create", "customObject": "create", "document": "upload", "opportunity": "create", "account": "create", "search": "query", "case": "create", "task": "create", "attachment": "create", "user": "get", "flow": "invoke"}},
	}, reads: map[string]bool{"search/query": true}},
	"n8n-nodes-base.pipedrive": {versions: []versionDefaults{
		{versions(1), "deal", map[string]string{"activity": "create", "deal": "create", "dealActivity": "getAll", "dealProduct": "add", "file": "create", "lead": "create", "note": "create", "organization": "create", "person": "create", "product": "getAll"}},
		{versions(2), "deal", map[string]string{"activity": "create", "deal": "create", "dealProduct": "add", "file": "create", "lead": "create", "note": "create", "organization": "create", "person": "create", "product": "create"}},
	}},
	"n8n-nodes-base.gmail": {versions: []versionDefaults{
		{versions(1), "draft", map[string]string{"draft": "create", "label": "create", "message": "send", "messageLabel": "add"}},
		{versions(2, 2.1, 2.2), "message", map[string]string{"draft": "create", "label": "getAll", "message": "send", "thread": "getAll"}},
	}},
	"n8n-nodes-base.emailSend": {versions: []versionDefaults{
		{versions(1), "", map[string]string{"": "send"}},
		{versions(2, 2.1), "email", map[string]string{"email": "send"}},
	}},
	"n8n-nodes-base.slack": {versions: []versionDefaults{
		{versions(1), "message", map[string]string{"channel": "create", "message": "post", "star": "add", "file": "upload", "reaction": "add", "user": "info", "userGroup": "create", "userProfile": "get"}},
		{versions(2, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7), "message", map[string]string{"channel": "create", "message": "post", "star": "add", "file": "upload", "reaction": "add", "user": "info", "userGroup": "create"}},
	}, reads: map[string]bool{"channel/member": true, "channel/replies": true, "user/info": true}},
	"n8n-nodes-base.telegram": {versions: []versionDefaults{
		{versions(1, 1.1, 1.2), "message", map[string]string{"chat": "get", "callback": "answerQuery", "file": "get", "message": "sendMessage"}},
	}, reads: map[string]bool{"chat/administrators": true, "chat/member": true}},
	"n8n-nodes-base.postgres": {versions: []versionDefaults{
		{versions(1), "", map[string]string{"": "insert"}},
		{versions(2, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7), "database", map[string]string{"database": "insert"}},
	}},
	"n8n-nodes-base.mySql": {versions: []versionDefaults{
		{versions(1), "", map[string]string{"": "insert"}},
		{versions(2, 2.1, 2.2, 2.3, 2.4, 2.5), "database", map[string]string{"database": "insert"}},
	}},
	"n8n-nodes-base.googleSheets": {versions: []versionDefaults{
		{versions(1, 2, 3, 4, 4.1, 4.2, 4.3, 4.4, 4.5, 4.6, 4.7), "sheet", map[string]string{"sheet": "read", "spreadsheet": "create"}},
	}},
	"n8n-nodes-base.airtable": {versions: []versionDefaults{
		{versions(1), "", map[string]string{"": "read"}},
		{versions(2, 2.1, 2.2), "record", map[string]string{"record": "get", "base": "getMany"}},
	}},
	"n8n-nodes-base.notion": {versions: []versionDefaults{
		{versions(1, 2, 2.1, 2.2), "page", map[string]string{"block": "append", "database": "get", "databasePage": "create", "page": "create", "user": "get"}},
		{versions(3), "page", map[string]string{"block": "append", "dataSource": "get", "database": "get", "databasePage": "create", "page": "create", "user": "get"}},
	}},
	"n8n-nodes-base.stripe": {versions: []versionDefaults{
		{versions(1), "balance", map[string]string{"balance": "get", "customerCard": "get", "charge": "get", "coupon": "create", "customer": "get", "meterEvent": "create", "source": "get", "token": "create"}},
	}},
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

// Classify says what a node does to other systems; which nodes call the
// guard is the runtime adapter's rule (n8n.GuardOperation), which OffWatch
// shares.
func Classify(n map[string]any) Classification {
	if op := n8n.GuardOperation(n); op != "" {
		return Classification{Effect: Guard, Operation: op}
	}
	t := nodeType(n)
	switch {
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
	return classifyApp(n, app)
}

// classifyApp: the operation the node's parameters name, or n8n's default
// for its resource and typeVersion when they leave it out.
func classifyApp(n map[string]any, app appNode) Classification {
	p := params(n)
	resource, rOK := plainParam(p, "resource")
	op, oOK := plainParam(p, "operation")
	if !rOK || !oOK {
		return Classification{Effect: Unclassified, Why: "the resource or operation parameter is not a plain name"}
	}
	if isExpression(op) {
		return Classification{Effect: Write, Operation: op, Why: "the operation is an expression: taken for a write"}
	}
	shown := func(op string) string {
		if resource != "" {
			return resource + "/" + op
		}
		return op
	}
	tv, hasVersion := n["typeVersion"].(float64)
	d, knownVersion := app.defaults(tv)
	knownVersion = knownVersion && hasVersion
	in := resource
	if in == "" && knownVersion {
		in = d.resource
	}
	why := ""
	if op == "" {
		if !knownVersion {
			return Classification{Effect: Unclassified, Why: fmt.Sprintf("no operation set and the audit does not know n8n's default for typeVersion %v of this node", n["typeVersion"])}
		}
		def, ok := d.ops[in]
		if !ok {
			return Classification{Effect: Unclassified, Why: fmt.Sprintf("no operation set and the audit does not know n8n's default for resource %q", in)}
		}
		op = def
		why = fmt.Sprintf("no operation set: n8n's default for resource %q in typeVersion %v", in, tv)
		if resource == "" && in != "" {
			why = fmt.Sprintf("no resource or operation set: n8n's defaults in typeVersion %v are resource %q, operation %q", tv, in, op)
		}
	}
	if isReadOperation(op) || (in != "" && app.reads[in+"/"+op]) {
		return Classification{Effect: Read, Operation: shown(op), Why: why}
	}
	return Classification{Effect: Write, Operation: shown(op), Why: why}
}

// plainParam is a string parameter, "" when absent; false when it is there
// but not a string (n8n stores resource and operation as plain names).
func plainParam(p map[string]any, k string) (string, bool) {
	v, ok := p[k]
	if !ok {
		return "", true
	}
	s, ok := v.(string)
	return s, ok
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

// isGuardOp: n is an enabled call of the guard's operation op.
func isGuardOp(n map[string]any, op string) bool {
	return n8n.GuardOperation(n) == op && !disabled(n)
}
