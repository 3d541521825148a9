// Package workflows holds the n8n workflows and HTTP-node templates that
// ship with n8n-guard, embedded so that `n8n-guard n8n setup` installs them
// without a checkout, and the one rule for editing them: a workflow's
// addresses live in its Config node, its token in an n8n credential.
//
// It must never hold a token or read one from the environment: n8n 2.x
// blocks $env in expressions by default, and a token in workflow JSON leaks
// with every export.
package workflows

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

//go:embed *.json templates/*.json
var shipped embed.FS

// Ids and names fixed in the shipped files. A CLI import keeps them; n8n's
// public API assigns its own ids, so setup rewrites references to them.
const (
	ErrorHandlerID = "n8nGuardErrors01"
	CredentialID   = "n8nGuardApiToken"
	CredentialName = "n8n-guard API token"
	// CredentialType is n8n's Header Auth: header Authorization, value
	// "Bearer <token>". It exists in every n8n 1.x and 2.x.
	CredentialType = "httpHeaderAuth"
	// ResumeCredentialID and ResumeCredentialName: the Header Auth
	// credential the Wait nodes check on a resume call (header
	// ResumeHeader, value the guard's resume secret), so that only the
	// guard wakes a parked execution.
	ResumeCredentialID   = "n8nGuardResume01"
	ResumeCredentialName = "n8n-guard resume"
	// ResumeHeader is the header the guard's resume calls carry
	// (n8n.ResumeDefaultHeader).
	ResumeHeader = "X-N8n-Guard-Resume"
	// CheckCredentialID and CheckCredentialName: the Header Auth
	// credential a check's Webhook node checks (header CheckHeader, value
	// the guard's check secret). A secret of its own, not the resume
	// secret: one leaked credential does not open the other.
	CheckCredentialID   = "n8nGuardCheck001"
	CheckCredentialName = "n8n-guard check"
	// CheckHeader is the header the guard's check calls carry
	// (n8n.CheckDefaultHeader).
	CheckHeader = "X-N8n-Guard-Check"
	// WaitNodeType is n8n's Wait node, where a parked execution waits.
	WaitNodeType = "n8n-nodes-base.wait"
	// ConfigNode is the node that holds a workflow's addresses.
	ConfigNode = "Config"
	// GuardURL is the Config value with the guard's address.
	GuardURL = "guard_url"
)

// Workflow is an n8n workflow as exported or imported. Nodes stay generic
// maps so that a round trip through n8n's API keeps every field of them.
type Workflow struct {
	ID          string           `json:"id,omitempty"`
	Name        string           `json:"name"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
}

// Shipped returns the importable workflows (workflows/*.json), the error
// handler first: the others name it as their error workflow.
func Shipped() ([]Workflow, error) {
	names, err := fs.Glob(shipped, "*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Workflow
	for _, name := range names {
		b, err := shipped.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var wf Workflow
		if err := json.Unmarshal(b, &wf); err != nil {
			return nil, fmt.Errorf("workflows/%s: %w", name, err)
		}
		if wf.ID == "" {
			return nil, fmt.Errorf("workflows/%s has no id: n8n 2.x refuses to import it", name)
		}
		if wf.ID == ErrorHandlerID {
			out = append([]Workflow{wf}, out...)
		} else {
			out = append(out, wf)
		}
	}
	return out, nil
}

// Template returns the one node of workflows/templates/<name>.json.
func Template(name string) (map[string]any, error) {
	b, err := shipped.ReadFile(path.Join("templates", name+".json"))
	if err != nil {
		return nil, err
	}
	var clip struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(b, &clip); err != nil {
		return nil, fmt.Errorf("templates/%s.json: %w", name, err)
	}
	if len(clip.Nodes) != 1 {
		return nil, fmt.Errorf("templates/%s.json: %d nodes, want 1", name, len(clip.Nodes))
	}
	return clip.Nodes[0], nil
}

// ConfigValue returns the value named name in the Config node.
func ConfigValue(nodes []map[string]any, name string) (any, bool) {
	for _, a := range configAssignments(nodes) {
		if a["name"] == name {
			return a["value"], true
		}
	}
	return nil, false
}

// SetConfig sets the value named name in the Config node, the one marked
// place a user edits; false when the workflow has no such value.
func SetConfig(nodes []map[string]any, name string, value any) bool {
	for _, a := range configAssignments(nodes) {
		if a["name"] == name {
			a["value"] = value
			return true
		}
	}
	return false
}

func configAssignments(nodes []map[string]any) []map[string]any {
	for _, n := range nodes {
		if n["name"] == ConfigNode {
			return Assignments(n)
		}
	}
	return nil
}

// Assignments are the values a Set node (n8n-nodes-base.set, version 3.3
// and later) assigns, each {"name", "value", "type"}, as the node's JSON
// holds them: a change to one is a change to the node.
func Assignments(node map[string]any) []map[string]any {
	params, _ := node["parameters"].(map[string]any)
	outer, _ := params["assignments"].(map[string]any)
	list, _ := outer["assignments"].([]any)
	var out []map[string]any
	for _, a := range list {
		if m, ok := a.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// UsesCredential tells whether a node authenticates to the guard with the
// guard's credential type, and under which credential id. The nodes that
// check the guard's calls (UsesResumeCredential, IsCheckWebhook) are not
// this one.
func UsesCredential(node map[string]any) (id string, ok bool) {
	if node["type"] == WaitNodeType || node["type"] == webhookNodeType {
		return "", false
	}
	return headerAuth(node)
}

// UsesResumeCredential tells whether a node checks the guard's resume
// credential, and under which credential id: a Wait node that checks a
// resume call's Header Auth.
func UsesResumeCredential(node map[string]any) (id string, ok bool) {
	p, _ := node["parameters"].(map[string]any)
	if node["type"] != WaitNodeType || p["incomingAuthentication"] != "headerAuth" {
		return "", false
	}
	return headerAuth(node)
}

func headerAuth(node map[string]any) (id string, ok bool) {
	creds, _ := node["credentials"].(map[string]any)
	c, ok := creds[CredentialType].(map[string]any)
	if !ok {
		return "", false
	}
	id, _ = c["id"].(string)
	return id, true
}

// PointCredential makes every node that uses the guard's credential use the
// credential with this id and name.
func PointCredential(nodes []map[string]any, id, name string) {
	for _, n := range nodes {
		if _, ok := UsesCredential(n); ok {
			n["credentials"].(map[string]any)[CredentialType] = map[string]any{"id": id, "name": name}
		}
	}
}

// PointCheckCredential makes every check webhook (IsCheckWebhook, with the
// resume credentials in resumeIDs) check the credential with this id and
// name: the check credential, also for a check made before checks had a
// secret of their own.
func PointCheckCredential(nodes []map[string]any, id, name string, resumeIDs ...string) {
	for _, n := range nodes {
		if IsCheckWebhook(n, resumeIDs...) {
			n["credentials"].(map[string]any)[CredentialType] = map[string]any{"id": id, "name": name}
		}
	}
}

// PointResumeCredential makes every Wait node that checks the resume
// credential use the credential with this id and name.
func PointResumeCredential(nodes []map[string]any, id, name string) {
	for _, n := range nodes {
		if _, ok := UsesResumeCredential(n); ok {
			n["credentials"].(map[string]any)[CredentialType] = map[string]any{"id": id, "name": name}
		}
	}
}
