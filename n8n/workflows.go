package n8n

import (
	"context"
	"net/http"
	"net/url"
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

// Published: the workflow runs on its triggers (2.x: published, 1.x: active).
func (w Workflow) Published() bool {
	return w.Active || (w.ActiveVersionID != nil && *w.ActiveVersionID != "")
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
		if err := c.Do(ctx, http.MethodGet, "/workflows?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// GuardedWrites are the names of w's nodes that reserve with the guard
// (the HTTP templates' reserve, the community node's Reserve): a
// workflow with one holds a guarded write.
func (w Workflow) GuardedWrites() []string {
	var out []string
	for _, n := range w.Nodes {
		if off, _ := n["disabled"].(bool); !off && GuardOperation(n) == "reserve" {
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
	if err := c.Do(ctx, http.MethodGet, "/executions?"+q.Encode(), nil, &page); err != nil {
		return false, err
	}
	for _, e := range page.Data {
		if e.Mode != "" && e.Mode != "manual" {
			return true, nil
		}
	}
	return false, nil
}
