// Package n8napi retries executions through n8n's public REST API for
// notify's "Retry execution" button (notify.Executions). It stays until
// the n8n package (one n8n client for the whole service) takes it over.
package n8napi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/notify"
)

// Client retries executions through n8n's public REST API: POST
// /api/v1/executions/{id}/retry (n8n 1.x and 2.x; the API key needs the
// execution:retry scope). Checked against a real n8n 1.113.3: 200 with the
// new execution ({"id": "2", "mode": "retry", "status": "running", …}),
// 404 {"message": "The execution with the ID \"999\" does not exist."},
// 401 {"message": "unauthorized"}.
type Client struct {
	base string // e.g. http://n8n:5678/api/v1
	key  string
	hc   *http.Client
}

// RetryTimeout bounds one retry call; n8n answers once the new
// execution started (some versions wait for more of it).
const RetryTimeout = 2 * time.Minute

// New returns the client of n8n's API at base (e.g.
// http://n8n:5678/api/v1) with key (it needs the execution:retry scope).
func New(base, key string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), key: key, hc: &http.Client{Timeout: RetryTimeout}}
}

// Retry starts the execution again with the workflow as it is saved now
// (the fix is usually in the workflow) and returns the new execution's id.
func (n *Client) Retry(ctx context.Context, executionID string) (string, error) {
	body, _ := json.Marshal(map[string]bool{"loadWorkflow": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		n.base+"/executions/"+url.PathEscape(executionID)+"/retry", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-N8N-API-KEY", n.key)
	resp, err := n.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &e)
		msg := e.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return "", refusal(resp.StatusCode, notify.Truncate(msg, 200))
	}
	var ex struct {
		ID any `json:"id"` // a string in n8n 2.x, a number in some 1.x
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&ex); err != nil {
		return "", fmt.Errorf("n8n's answer is not an execution: %w", err)
	}
	if ex.ID == nil {
		return "", errors.New("n8n's answer carries no execution id")
	}
	return fmt.Sprint(ex.ID), nil
}

// refusal maps n8n's answer to what notify understands.
func refusal(status int, msg string) error {
	switch status {
	case http.StatusNotFound:
		return &notify.RetryError{Refusal: notify.RetryNotFound, Message: msg}
	case http.StatusConflict:
		return &notify.RetryError{Refusal: notify.RetryConflict, Message: msg}
	case http.StatusUnauthorized, http.StatusForbidden:
		return &notify.RetryError{Refusal: notify.RetryUnauthorized, Message: fmt.Sprintf("%d %s", status, msg)}
	}
	return fmt.Errorf("n8n answered %d: %s", status, msg)
}
