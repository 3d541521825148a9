package n8nsetup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/n8n-guard/n8n-guard/n8n"
)

// The community node (n8n-nodes/): its npm package, node and credential.
const (
	CommunityPackage = "n8n-nodes-n8n-guard"
	// CommunityNodeType is its type when installed as a community package
	// (Settings → Community nodes, or npm in ~/.n8n/nodes).
	CommunityNodeType = CommunityPackage + ".n8nGuard"
	// CustomNodeType is its type when n8n loads it from a custom
	// extensions folder (N8N_CUSTOM_EXTENSIONS, ~/.n8n/custom).
	CustomNodeType = "CUSTOM.n8nGuard"
	// CommunityCredentialType is its credential (base URL and token).
	CommunityCredentialType = "n8nGuardApi"
	// CommunityCredentialName is the name guard gives the credential it
	// creates, and looks for first.
	CommunityCredentialName = "n8n-guard API"
)

// Use says which nodes `n8n guard` puts in front of a node.
type Use string

const (
	// UseAuto: the community node when n8n has it and its type can be
	// told, else the HTTP templates (and the report says why).
	UseAuto Use = "auto"
	// UseCommunity: the community node, or an error when n8n lacks it.
	UseCommunity Use = "community"
	// UseHTTP: the shipped HTTP-node templates.
	UseHTTP Use = "http"
)

// ParseUse reads --use.
func ParseUse(s string) (Use, error) {
	switch u := Use(strings.ToLower(strings.TrimSpace(s))); u {
	case "", UseAuto:
		return UseAuto, nil
	case UseCommunity, UseHTTP:
		return u, nil
	}
	return "", fmt.Errorf("--use %q: give auto, community or http", s)
}

// credentialSchema asks n8n for a credential type's data schema, through
// the public API's GET /credentials/schema/{type} (n8n 1.x and 2.x alike,
// no scope needed): known when a loaded node package brought the type
// (200), not when none did (404).
func (inst *Instance) credentialSchema(ctx context.Context, typ string) (schema CredentialTypeSchema, known bool, err error) {
	err = inst.Client.Do(ctx, http.MethodGet, "/credentials/schema/"+url.PathEscape(typ), nil, &schema)
	var ne *n8n.Error
	switch {
	case err == nil:
		return schema, true, nil
	case errors.As(err, &ne) && ne.Status == http.StatusNotFound:
		return schema, false, nil
	}
	return schema, false, err
}

// CredentialTypeSchema is the part of a credential type's schema guard
// reads: its fields.
type CredentialTypeSchema struct {
	Properties map[string]any `json:"properties"`
}

// InstalledPackage is one community package n8n 2.x installed, as its
// public API lists it.
type InstalledPackage struct {
	PackageName    string `json:"packageName"`
	InstalledNodes []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"installedNodes"`
	FailedLoading bool `json:"failedLoading"`
}

// communityPackages lists the community packages n8n installed (2.x,
// scope communityPackage:list); listed is false where n8n cannot list them
// (1.x has no such route; a key without the scope is refused).
func (inst *Instance) communityPackages(ctx context.Context) (pkgs []InstalledPackage, listed bool, err error) {
	if inst.Version.Major < 2 {
		return nil, false, nil
	}
	err = inst.Client.Do(ctx, http.MethodGet, "/community-packages", nil, &pkgs)
	var ne *n8n.Error
	if errors.As(err, &ne) && (ne.Status == http.StatusForbidden || ne.Status == http.StatusNotFound || ne.Status == http.StatusUnauthorized) {
		return nil, false, nil
	}
	return pkgs, err == nil, err
}

// communityNodeType decides which nodes guard places, "" for the HTTP
// templates. Whether n8n has the community node is asked through the
// public API on both n8n versions: GET /credentials/schema/n8nGuardApi
// answers 200 only when the package (or the custom extension) that brings
// the node and its credential is loaded, 404 otherwise, and needs no scope.
// A throwaway workflow with the node's type would prove nothing: saving
// tolerates a node type n8n does not know (read in n8n 2.41.1: its
// creation service skips unknown types), which is checked only when the
// workflow is published or run, and guard publishes no probe on a team's
// instance. The node's type name then depends on how it was installed
// (n8n-nodes-n8n-guard.n8nGuard as a package, CUSTOM.n8nGuard from a custom
// extensions folder), which no public route of 1.x tells; it is taken, in
// this order, from a workflow that uses the node already (n8n wrote its
// type), from 2.x's list of installed community packages (the package
// there: its node's type; not there although n8n has the credential type:
// a custom extension). auto places the HTTP templates, and says why, when
// it cannot tell; community then takes the package's type. --park is
// always placed with the templates: the node's Fail sends no resume URL,
// so the write that fails as the destination goes down would not park.
func (n *session) communityNodeType(ctx context.Context, all []n8n.Workflow, use Use, park bool) (string, error) {
	if use == UseHTTP {
		n.rep.add(Note, "the guard is placed with the HTTP-node templates (--use http)")
		return "", nil
	}
	httpBecause := func(format string, args ...any) (string, error) {
		why := fmt.Sprintf(format, args...)
		if use == UseCommunity {
			return "", fmt.Errorf("--use community: %s", why)
		}
		n.rep.add(Note, "the guard is placed with the HTTP-node templates: %s", why)
		return "", nil
	}
	if park {
		return httpBecause("with --park, because the community node's Fail sends no resume URL: a write that fails as its destination goes down would stop instead of parking, as the templates' fail parks it")
	}
	_, known, err := n.credentialSchema(ctx, CommunityCredentialType)
	if err != nil {
		return httpBecause("whether n8n has the community node %s cannot be told (GET /credentials/schema/%s: %v)", CommunityPackage, CommunityCredentialType, err)
	}
	if !known {
		why := ""
		if n.Version.Major >= 3 || n.Version.From == n8n.FromInferred {
			// 3.0 turned N8N_UNVERIFIED_PACKAGES_ENABLED off by default, and
			// n8n-nodes-n8n-guard is not (yet) a verified package.
			why = fmt.Sprintf("; on n8n 3.x an unverified community package installs only with N8N_UNVERIFIED_PACKAGES_ENABLED=true, and %s is not verified", CommunityPackage)
		}
		return httpBecause("n8n does not have the community node %s (it knows no credential type %s)%s", CommunityPackage, CommunityCredentialType, why)
	}
	chosen := func(typ, how string) (string, error) {
		n.rep.add(Note, "the guard is placed with the community node %s (%s)", typ, how)
		return typ, nil
	}
	if typ := usedCommunityType(all); typ != "" {
		return chosen(typ, "n8n has its credential type; its type as a workflow here uses it")
	}
	pkgs, listed, err := n.communityPackages(ctx)
	if err != nil {
		return "", err
	}
	if listed {
		for _, p := range pkgs {
			if p.PackageName != CommunityPackage || p.FailedLoading {
				continue
			}
			for _, nd := range p.InstalledNodes {
				if strings.HasSuffix(nd.Type, ".n8nGuard") {
					return chosen(nd.Type, "installed as the community package "+CommunityPackage)
				}
			}
			return chosen(CommunityNodeType, "installed as the community package "+CommunityPackage)
		}
		return chosen(CustomNodeType, "n8n has its credential type, and it is not an installed community package: loaded from a custom extensions folder")
	}
	why := "n8n 1.x has no API that lists community packages"
	if n.Version.Major >= 2 {
		why = "the API key lacks the scope communityPackage:list"
	}
	if use == UseCommunity {
		return chosen(CommunityNodeType, fmt.Sprintf("--use community; no workflow uses the node yet and %s, so its type as a community package is assumed", why))
	}
	return httpBecause("n8n has the community node's credential type, but its node type (%s as a package, %s as a custom extension) cannot be told: no workflow uses the node yet and %s; --use community takes %s",
		CommunityNodeType, CustomNodeType, why, CommunityNodeType)
}

// usedCommunityType is the community node's type as the instance's
// workflows use it, "" when none does; the most used one when they differ.
func usedCommunityType(all []n8n.Workflow) string {
	count := map[string]int{}
	for _, w := range all {
		if w.IsArchived {
			continue
		}
		for _, node := range w.Nodes {
			if n8n.IsCommunityGuard(node) {
				count[nodeType(node)]++
			}
		}
	}
	best := ""
	for t, c := range count {
		if best == "" || c > count[best] || (c == count[best] && t < best) {
			best = t
		}
	}
	return best
}

// communityCredential finds the community node's credential (type
// n8nGuardApi) or creates it from the guard's token and address. Where
// n8n lists credentials (2.x): the one named "n8n-guard API", else the
// one the instance's community nodes use, else the only one. Where it
// cannot (1.x), the reference of a community node of the instance's
// workflows is trusted.
func (n *session) communityCredential(ctx context.Context, all []n8n.Workflow, creds []Credential, listed bool, token, guardURL string) (guardCredential, error) {
	used := map[string]string{}
	var usedOrder []string
	for _, w := range all {
		for _, node := range w.Nodes {
			if !n8n.IsCommunityGuard(node) || w.IsArchived {
				continue
			}
			c, _ := node["credentials"].(map[string]any)
			ref, _ := c[CommunityCredentialType].(map[string]any)
			id, _ := ref["id"].(string)
			name, _ := ref["name"].(string)
			if id != "" {
				if _, seen := used[id]; !seen {
					usedOrder = append(usedOrder, id)
				}
				used[id] = name
			}
		}
	}
	if listed {
		var ours []Credential
		for _, c := range creds {
			if c.Type == CommunityCredentialType {
				ours = append(ours, c)
			}
		}
		sort.SliceStable(ours, func(i, j int) bool { return ours[i].Name < ours[j].Name })
		for _, c := range ours {
			if c.Name == CommunityCredentialName {
				return guardCredential{c.ID, c.Name}, nil
			}
		}
		for _, c := range ours {
			if _, ok := used[c.ID]; ok {
				return guardCredential{c.ID, c.Name}, nil
			}
		}
		if len(ours) > 0 {
			if len(ours) > 1 {
				n.rep.add(Note, "%d credentials of type %s, none named %q nor used by a community node: %q is taken", len(ours), CommunityCredentialType, CommunityCredentialName, ours[0].Name)
			}
			return guardCredential{ours[0].ID, ours[0].Name}, nil
		}
	} else if len(usedOrder) > 0 {
		id := usedOrder[0]
		return guardCredential{id, used[id]}, nil
	}
	if token == "" || guardURL == "" {
		n.problem("no n8n credential of type %s for the community node: give the guard's token (N8N_GUARD_TOKEN or --data) and its address (--guard-url, or setup's) and guard creates %q, or create it in n8n (N8n Guard API: Base URL, Token), or --use http",
			CommunityCredentialType, CommunityCredentialName)
		return guardCredential{}, nil
	}
	n.change("create credential %q (%s: the guard's address and token)", CommunityCredentialName, CommunityCredentialType)
	if n.dryRun {
		return guardCredential{"(new)", CommunityCredentialName}, nil
	}
	data := map[string]any{"baseUrl": strings.TrimRight(guardURL, "/"), "token": token}
	// n8n 1.x adds the HTTP Request node's domain restriction to a
	// credential type with generic auth, and its API then requires
	// allowedDomains unless the restriction is given ("all", the editor's
	// default); 2.x has no such field and refuses unknown ones.
	schema, _, err := n.credentialSchema(ctx, CommunityCredentialType)
	if err != nil {
		return guardCredential{}, err
	}
	if _, ok := schema.Properties["allowedHttpRequestDomains"]; ok {
		data["allowedHttpRequestDomains"] = "all"
	}
	var out Credential
	err = n.Client.Do(ctx, http.MethodPost, "/credentials", map[string]any{
		"name": CommunityCredentialName, "type": CommunityCredentialType, "data": data,
	}, &out)
	return guardCredential{out.ID, out.Name}, err
}

// communityNode is one of the community node's operations, with its
// credential.
func (b *builder) communityNode(params map[string]any) map[string]any {
	return map[string]any{
		"type": b.spec.NodeType, "typeVersion": 1, "parameters": params,
		"credentials": map[string]any{CommunityCredentialType: map[string]any{"id": b.spec.Credential.ID, "name": b.spec.Credential.Name}},
	}
}

// buildCommunity places the community node around the target: its Reserve
// (outputs Proceed, Already Done, Blocked), the target's own item handed
// on, Complete after it, and on its error output Fail with the reason Auto — the node's classification, the same rules
// as the templates' (n8n-nodes/nodes/N8nGuard/classify.ts: 502/504 and
// anything unclear outcome_unknown; 408, 429, other 5xx
// destination_failed; other 4xx validation_failed; refused connections,
// DNS, TLS destination_unreachable) — then the execution stopped. A
// webhook answered by Respond to Webhook answers a copy with its code.
// Parking is not placed with it (communityNodeType).
func (b *builder) buildCommunity(g *graph, target map[string]any, key, ns, dest string) error {
	n := b.names
	name := b.spec.Node
	if b.spec.Park {
		return fmt.Errorf("--park is placed with the HTTP templates, not the community node (communityNodeType)")
	}
	in := g.in[name][0]
	var after []edge
	if len(g.out[name]) > 0 {
		after = g.out[name][0]
	}
	b.add("reserve", b.communityNode(map[string]any{
		"operation": "reserve", "namespace": ns,
		"key":            "={{ String((" + key + ") ?? '') }}",
		"owner":          "=n8n {{ $workflow.id }} exec {{ $execution.id }}",
		"reserveOptions": map[string]any{"destination": dest},
	}), -440, 0)
	itemJS := fmt.Sprintf("// n8n-guard: %s gets the item it got before the reserve.\nconst src = $(%s).item;\nreturn src.binary ? { json: src.json, binary: src.binary } : { json: src.json };\n", jsString(name), jsString(in.From))
	b.add("item", codeNode(itemJS), -220, 0)
	b.add("complete", b.communityNode(map[string]any{
		"operation": "complete",
		"resultRef": "={{ String($json.id ?? ($json.body || {}).id ?? '').slice(0, 512) }}",
	}), 220, -160)
	b.add("fail", b.communityNode(map[string]any{"operation": "fail", "reason": "auto"}), 220, 160)
	b.add("failed", stopNode(fmt.Sprintf("=%s failed (n8n-guard: {{ $json.outcome }}, key {{ $json.state }}): {{ String(($(%s).item.json.error || {}).message || $(%s).item.json.error || '').slice(0, 300) }}",
		exprText(name), jsString(name), jsString(name))), 440, 160)
	target["onError"] = "continueErrorOutput"
	b.rw.Changes = append(b.rw.Changes, fmt.Sprintf("set On Error of %q to its error output (failed with the reason Auto)", name))

	conns := b.rw.Connections
	link := func(from string, outputs ...[]string) { linkMain(conns, from, outputs...) }
	retarget(conns, in, n["reserve"])
	decided := []string{}
	if responds(g, name) {
		b.add("answer", map[string]any{"type": "n8n-nodes-base.respondToWebhook", "typeVersion": 1.1, "parameters": map[string]any{
			"respondWith":  "json",
			"responseBody": "={{ JSON.stringify({ code: $json.outcome, key: $json.key ?? null, result_ref: $json.result_ref ?? null, message: $json.message ?? null }) }}",
			"options":      map[string]any{"responseCode": "={{ ({ duplicate_event: 200, in_progress: 409, state_unknown: 202, rejected: 422, destination_paused: 503, parked: 202 })[$json.outcome] ?? 409 }}"},
		}}, 0, 320)
		decided = append(decided, n["answer"])
	}
	link(n["reserve"], []string{n["item"]}, decided, decided)
	link(n["item"], []string{name})
	link(name, []string{n["complete"]}, []string{n["fail"]})
	link(n["fail"], []string{n["failed"]})
	b.outputAfter(name, jsString(name), after, link)
	return nil
}
