package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// n8nAPI is a client of n8n's public REST API (/api/v1, X-N8N-API-KEY), the
// one way in that n8n documents for tools; nothing here uses the editor's
// internal /rest routes, which change between releases.
type n8nAPI struct {
	base string
	key  string
	http *http.Client
}

func newN8NAPI(base, key string, timeout time.Duration) *n8nAPI {
	return &n8nAPI{base: strings.TrimRight(base, "/"), key: key, http: &http.Client{Timeout: timeout}}
}

// n8nError is an answer of n8n that is not a success, said the way a user
// can act on it.
type n8nError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *n8nError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized:
		hint = ": n8n refused the API key (wrong, expired or revoked; create one under Settings → n8n API)"
	case http.StatusForbidden:
		hint = ": the API key may not do this (a scope it lacks, or a project it cannot reach; use a key of the instance owner or of a member of that project)"
	case http.StatusNotFound:
		hint = ": not found (gone, or in a project this API key cannot reach)"
	}
	return fmt.Sprintf("n8n %s %s: HTTP %d %s%s", e.Method, e.Path, e.Status, e.Message, hint)
}

// errN8NUnreachable wraps every failure to reach n8n at all.
var errN8NUnreachable = errors.New("n8n unreachable")

func (a *n8nAPI) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+"/api/v1"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-N8N-API-KEY", a.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", errN8NUnreachable, a.base, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode/100 != 2 {
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Message == "" {
			m.Message = strings.TrimSpace(string(raw))
			if len(m.Message) > 300 {
				m.Message = m.Message[:300] + "…"
			}
			if strings.HasPrefix(m.Message, "<") {
				m.Message = "(an HTML page: is this n8n's address?)"
			}
		}
		return &n8nError{Method: method, Path: path, Status: resp.StatusCode, Message: m.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("n8n %s %s: answer is not JSON (is %s n8n?): %w", method, path, a.base, err)
	}
	return nil
}

// remoteWorkflow is a workflow as n8n's public API lists it.
type remoteWorkflow struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Active bool   `json:"active"`
	// ActiveVersionID is the published version (2.x only).
	ActiveVersionID *string          `json:"activeVersionId"`
	IsArchived      bool             `json:"isArchived"`
	Nodes           []map[string]any `json:"nodes"`
	Connections     map[string]any   `json:"connections"`
	Settings        map[string]any   `json:"settings"`
	Tags            []struct {
		Name string `json:"name"`
	} `json:"tags"`
}

// ErrorWorkflow is the id in settings.errorWorkflow, empty for none.
func (w remoteWorkflow) ErrorWorkflow() string {
	s, _ := w.Settings["errorWorkflow"].(string)
	return s
}

// HasErrorTrigger: an error workflow itself needs no error workflow.
func (w remoteWorkflow) HasErrorTrigger() bool {
	for _, n := range w.Nodes {
		if n["type"] == "n8n-nodes-base.errorTrigger" {
			return true
		}
	}
	return false
}

// Published: the workflow runs on its triggers (2.x: published, 1.x: active).
func (w remoteWorkflow) Published() bool {
	return w.Active || (w.ActiveVersionID != nil && *w.ActiveVersionID != "")
}

// workflowFilter narrows a listing the way n8n's API can.
type workflowFilter struct {
	Tag, ProjectID string
}

// Workflows lists every workflow the key can see, page by page.
func (a *n8nAPI) Workflows(ctx context.Context, f workflowFilter) ([]remoteWorkflow, error) {
	var all []remoteWorkflow
	q := url.Values{"limit": {"250"}, "excludePinnedData": {"true"}}
	if f.Tag != "" {
		q.Set("tags", f.Tag)
	}
	if f.ProjectID != "" {
		q.Set("projectId", f.ProjectID)
	}
	for {
		var page struct {
			Data       []remoteWorkflow `json:"data"`
			NextCursor *string          `json:"nextCursor"`
		}
		if err := a.do(ctx, http.MethodGet, "/workflows?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// workflowBody is what create and update accept: n8n refuses read-only
// members (id, active, versionId) in them.
type workflowBody struct {
	Name        string           `json:"name"`
	Nodes       []map[string]any `json:"nodes"`
	Connections map[string]any   `json:"connections"`
	Settings    map[string]any   `json:"settings"`
}

func (a *n8nAPI) CreateWorkflow(ctx context.Context, wf workflows.Workflow) (remoteWorkflow, error) {
	var out remoteWorkflow
	err := a.do(ctx, http.MethodPost, "/workflows", workflowBody{wf.Name, wf.Nodes, wf.Connections, wf.Settings}, &out)
	return out, err
}

// UpdateWorkflow saves a workflow. publish says whether a published 2.x
// workflow goes live with the change (publishIfActive); 1.x re-activates an
// active workflow either way.
func (a *n8nAPI) UpdateWorkflow(ctx context.Context, id string, wf workflowBody, major int, publish bool) error {
	path := "/workflows/" + url.PathEscape(id)
	if major >= 2 {
		path += "?publishIfActive=" + strconv.FormatBool(publish)
	}
	return a.do(ctx, http.MethodPut, path, wf, nil)
}

// Publish puts a workflow live: /publish on 2.x, /activate on 1.x.
func (a *n8nAPI) Publish(ctx context.Context, id string, major int) error {
	verb := "/activate"
	if major >= 2 {
		verb = "/publish"
	}
	return a.do(ctx, http.MethodPost, "/workflows/"+url.PathEscape(id)+verb, struct{}{}, nil)
}

// remoteCredential is a credential without its secret.
type remoteCredential struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Credentials lists credentials; ok is false where n8n has no such listing
// (1.x's public API can create credentials but not list them) or the key
// lacks the scope credential:list, which the caller says.
func (a *n8nAPI) Credentials(ctx context.Context, major int) (creds []remoteCredential, ok bool, err error) {
	if major < 2 {
		return nil, false, nil
	}
	q := url.Values{"limit": {"250"}}
	for {
		var page struct {
			Data       []remoteCredential `json:"data"`
			NextCursor *string            `json:"nextCursor"`
		}
		if err := a.do(ctx, http.MethodGet, "/credentials?"+q.Encode(), nil, &page); err != nil {
			var ne *n8nError
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
func (a *n8nAPI) CreateGuardCredential(ctx context.Context, token string) (remoteCredential, error) {
	var out remoteCredential
	err := a.do(ctx, http.MethodPost, "/credentials", map[string]any{
		"name": workflows.CredentialName, "type": workflows.CredentialType,
		"data": map[string]any{"name": "Authorization", "value": "Bearer " + token},
	}, &out)
	return out, err
}
