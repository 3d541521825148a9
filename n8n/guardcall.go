package n8n

import (
	"slices"
	"strings"
)

// guardPaths are the guard's own API routes, which its HTTP templates call.
var guardPaths = []string{"/v1/reserve", "/v1/complete", "/v1/fail", "/v1/lookup", "/v1/resolve", "/v1/keys", "/v1/n8n/error"}

// IsCommunityGuard: node n is the community node, installed as a package
// (n8n-nodes-n8n-guard.n8nGuard) or as a custom extension (CUSTOM.n8nGuard).
func IsCommunityGuard(n map[string]any) bool {
	typ, _ := n["type"].(string)
	return strings.HasSuffix(typ, ".n8nGuard")
}

// GuardOperation is which of the guard's operations node n calls
// (reserve, complete, fail, lookup, resolve; "other" for another of its
// routes), "" when n does not call the guard: only the community node and
// an HTTP Request node to one of the guard's routes do. OffWatch finds a
// guarded write by it, n8nsetup's audit and rewrite every guard node.
func GuardOperation(n map[string]any) string {
	p, _ := n["parameters"].(map[string]any)
	if IsCommunityGuard(n) {
		if op, _ := p["operation"].(string); op != "" {
			return op
		}
		return "reserve"
	}
	typ, _ := n["type"].(string)
	u, _ := p["url"].(string)
	if typ != "n8n-nodes-base.httpRequest" || !slices.ContainsFunc(guardPaths, func(r string) bool { return strings.Contains(u, r) }) {
		return ""
	}
	for _, op := range []string{"reserve", "complete", "fail", "lookup", "resolve"} {
		if strings.Contains(u, "/v1/"+op) {
			return op
		}
	}
	return "other"
}
