package n8n

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// Workflow is a workflow as n8n's public API lists it.
type Workflow struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Active bool   `json:"active"`
	// ActiveVersionID is the published version (2.x only).
	ActiveVersionID *string `json:"activeVersionId"`
	// VersionID is the saved version (2.x: equal to ActiveVersionID when
	// nothing unpublished was saved since).
	VersionID string `json:"versionId"`
	// ActiveVersion is the published version's content (2.x), which
	// differs from Nodes and Connections while edits are unpublished.
	ActiveVersion *struct {
		Nodes       []map[string]any `json:"nodes"`
		Connections map[string]any   `json:"connections"`
	} `json:"activeVersion"`
	IsArchived bool `json:"isArchived"`
	// UpdatedAt is when n8n last changed the workflow (turning it off
	// included): OffWatch tells one time off from the next by it.
	UpdatedAt   string           `json:"updatedAt"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
	Tags        []struct {
		Name string `json:"name"`
	} `json:"tags"`
}

// ErrorWorkflow is the id in settings.errorWorkflow, empty for none.
func (w Workflow) ErrorWorkflow() string {
	s, _ := w.Settings["errorWorkflow"].(string)
	return s
}

// HasErrorTrigger: an error workflow itself needs no error workflow.
func (w Workflow) HasErrorTrigger() bool {
	for _, n := range w.Nodes {
		if n["type"] == "n8n-nodes-base.errorTrigger" {
			return true
		}
	}
	return false
}

// Published: the workflow runs on its triggers (2.x: published, 1.x: active).
func (w Workflow) Published() bool {
	return w.Active || (w.ActiveVersionID != nil && *w.ActiveVersionID != "")
}

// Draft: a 2.x workflow has saved edits that are not published.
func (w Workflow) Draft() bool {
	return w.ActiveVersionID != nil && *w.ActiveVersionID != "" && *w.ActiveVersionID != w.VersionID
}

// Workflow reads one workflow.
func (c *Client) Workflow(ctx context.Context, id string) (Workflow, error) {
	var w Workflow
	err := c.do(ctx, http.MethodGet, "/workflows/"+url.PathEscape(id)+"?excludePinnedData=true", nil, &w)
	return w, err
}

// Filter narrows a listing the way n8n's API can.
type Filter struct {
	Tag, ProjectID string
}

// Workflows lists every workflow the key can see, page by page.
func (c *Client) Workflows(ctx context.Context, f Filter) ([]Workflow, error) {
	var all []Workflow
	q := url.Values{"limit": {"250"}, "excludePinnedData": {"true"}}
	if f.Tag != "" {
		q.Set("tags", f.Tag)
	}
	if f.ProjectID != "" {
		q.Set("projectId", f.ProjectID)
	}
	for {
		var page struct {
			Data       []Workflow `json:"data"`
			NextCursor *string    `json:"nextCursor"`
		}
		if err := c.do(ctx, http.MethodGet, "/workflows?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// WorkflowBody is what create and update accept: n8n refuses read-only
// members (id, active, versionId) in them.
type WorkflowBody struct {
	Name        string           `json:"name"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
}

// CreateWorkflow saves a new workflow (never published).
func (c *Client) CreateWorkflow(ctx context.Context, wf workflows.Workflow) (Workflow, error) {
	var out Workflow
	err := c.do(ctx, http.MethodPost, "/workflows", WorkflowBody{wf.Name, wf.Nodes, wf.Connections, wf.Settings}, &out)
	return out, err
}

// UpdateWorkflow saves a workflow. publish says whether a published 2.x
// workflow goes live with the change (publishIfActive); 1.x re-activates an
// active workflow either way.
func (c *Client) UpdateWorkflow(ctx context.Context, id string, wf WorkflowBody, major int, publish bool) error {
	path := "/workflows/" + url.PathEscape(id)
	if major >= 2 {
		path += "?publishIfActive=" + strconv.FormatBool(publish)
	}
	return c.do(ctx, http.MethodPut, path, wf, nil)
}

// Publish puts a workflow live: /publish on 2.x, /activate on 1.x.
func (c *Client) Publish(ctx context.Context, id string, major int) error {
	verb := "/activate"
	if major >= 2 {
		verb = "/publish"
	}
	return c.do(ctx, http.MethodPost, "/workflows/"+url.PathEscape(id)+verb, struct{}{}, nil)
}

// Credential is a credential without its secret.
type Credential struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Credentials lists credentials; ok is false where n8n has no such listing
// (1.x's public API can create credentials but not list them) or the key
// lacks the scope credential:list, which the caller says.
func (c *Client) Credentials(ctx context.Context, major int) (creds []Credential, ok bool, err error) {
	if major < 2 {
		return nil, false, nil
	}
	q := url.Values{"limit": {"250"}}
	for {
		var page struct {
			Data       []Credential `json:"data"`
			NextCursor *string      `json:"nextCursor"`
		}
		if err := c.do(ctx, http.MethodGet, "/credentials?"+q.Encode(), nil, &page); err != nil {
			var ne *Error
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

// CreateGuardCredential stores the guard's token as n8n's Header Auth.
func (c *Client) CreateGuardCredential(ctx context.Context, token string) (Credential, error) {
	return c.CreateHeaderAuth(ctx, workflows.CredentialName, "Authorization", "Bearer "+token)
}

// CreateHeaderAuth stores a Header Auth credential (header: value).
func (c *Client) CreateHeaderAuth(ctx context.Context, name, header, value string) (Credential, error) {
	var out Credential
	err := c.do(ctx, http.MethodPost, "/credentials", map[string]any{
		"name": name, "type": workflows.CredentialType,
		"data": map[string]any{"name": header, "value": value},
	}, &out)
	return out, err
}

// GuardedWrites are the names of w's nodes that reserve with the guard
// (the HTTP templates' reserve, the community node's Reserve): a
// workflow with one holds a guarded write.
func (w Workflow) GuardedWrites() []string {
	var out []string
	for _, n := range w.Nodes {
		if isGuardOp(n, "reserve") {
			name, _ := n["name"].(string)
			out = append(out, name)
		}
	}
	return out
}

// ProductionRuns tells whether n8n ran the workflow on its triggers (an
// execution in a mode other than manual among its newest ones): a
// workflow that is off now and ran before was turned off, by a person or
// by n8n. GET /api/v1/executions?workflowId=…, scope execution:list.
func (c *Client) ProductionRuns(ctx context.Context, workflowID string) (bool, error) {
	var page struct {
		Data []struct {
			Mode string `json:"mode"`
		} `json:"data"`
	}
	q := url.Values{"workflowId": {workflowID}, "limit": {"20"}}
	if err := c.do(ctx, http.MethodGet, "/executions?"+q.Encode(), nil, &page); err != nil {
		return false, err
	}
	for _, e := range page.Data {
		if e.Mode != "" && e.Mode != "manual" {
			return true, nil
		}
	}
	return false, nil
}
