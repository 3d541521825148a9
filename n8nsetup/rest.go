package n8nsetup

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// The rewriter's own calls to n8n's public API, made through the runtime
// client's Do (one base URL, key, body limit and error text); the reads
// the runtime shares (Workflows, ProductionRuns) are the client's. The
// version decides the route where 1.x and 2.x differ.

// workflow reads one workflow.
func (inst *Instance) workflow(ctx context.Context, id string) (n8n.Workflow, error) {
	var w n8n.Workflow
	err := inst.Client.Do(ctx, http.MethodGet, "/workflows/"+url.PathEscape(id)+"?excludePinnedData=true", nil, &w)
	return w, err
}

// WorkflowBody is what create and update accept: n8n refuses read-only
// members (id, active, versionId) in them.
type WorkflowBody struct {
	Name        string           `json:"name"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
}

// createWorkflow saves a new workflow (never published).
func (inst *Instance) createWorkflow(ctx context.Context, wf workflows.Workflow) (n8n.Workflow, error) {
	var out n8n.Workflow
	err := inst.Client.Do(ctx, http.MethodPost, "/workflows", WorkflowBody{wf.Name, wf.Nodes, wf.Connections, wf.Settings}, &out)
	return out, err
}

// updateWorkflow saves a workflow. publish says whether a published 2.x
// workflow goes live with the change (publishIfActive); 1.x re-activates an
// active workflow either way.
func (inst *Instance) updateWorkflow(ctx context.Context, id string, wf WorkflowBody, publish bool) error {
	path := "/workflows/" + url.PathEscape(id)
	if inst.Version.Major >= 2 {
		path += "?publishIfActive=" + strconv.FormatBool(publish)
	}
	return inst.Client.Do(ctx, http.MethodPut, path, wf, nil)
}

// publish puts a workflow live: /publish on 2.x, /activate on 1.x.
func (inst *Instance) publish(ctx context.Context, id string) error {
	verb := "/activate"
	if inst.Version.Major >= 2 {
		verb = "/publish"
	}
	return inst.Client.Do(ctx, http.MethodPost, "/workflows/"+url.PathEscape(id)+verb, struct{}{}, nil)
}

// Credential is a credential without its secret.
type Credential struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// credentials lists credentials; ok is false where n8n has no such listing
// (1.x's public API can create credentials but not list them) or the key
// lacks the scope credential:list, which the caller says.
func (inst *Instance) credentials(ctx context.Context) (creds []Credential, ok bool, err error) {
	if inst.Version.Major < 2 {
		return nil, false, nil
	}
	q := url.Values{"limit": {"250"}}
	for {
		var page struct {
			Data       []Credential `json:"data"`
			NextCursor *string      `json:"nextCursor"`
		}
		if err := inst.Client.Do(ctx, http.MethodGet, "/credentials?"+q.Encode(), nil, &page); err != nil {
			var ne *n8n.Error
			if errors.As(err, &ne) && ne.Status == http.StatusForbidden {
				return nil, false, nil
			}
			return nil, false, err
		}
		creds = append(creds, page.Data...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return creds, true, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// createGuardCredential stores the guard's token as n8n's Header Auth.
func (inst *Instance) createGuardCredential(ctx context.Context, token string) (Credential, error) {
	return inst.createHeaderAuth(ctx, workflows.CredentialName, "Authorization", "Bearer "+token)
}

// createHeaderAuth stores a Header Auth credential (header: value).
func (inst *Instance) createHeaderAuth(ctx context.Context, name, header, value string) (Credential, error) {
	var out Credential
	err := inst.Client.Do(ctx, http.MethodPost, "/credentials", map[string]any{
		"name": name, "type": workflows.CredentialType,
		"data": map[string]any{"name": header, "value": value},
	}, &out)
	return out, err
}

// errorWorkflow is the id in w's settings.errorWorkflow, empty for none.
func errorWorkflow(w n8n.Workflow) string {
	s, _ := w.Settings["errorWorkflow"].(string)
	return s
}

// hasErrorTrigger: an error workflow itself needs no error workflow.
func hasErrorTrigger(w n8n.Workflow) bool {
	for _, n := range w.Nodes {
		if n["type"] == "n8n-nodes-base.errorTrigger" {
			return true
		}
	}
	return false
}

// hasDraft: a 2.x workflow has saved edits that are not published.
func hasDraft(w n8n.Workflow) bool {
	return w.ActiveVersionID != nil && *w.ActiveVersionID != "" && *w.ActiveVersionID != w.VersionID
}
