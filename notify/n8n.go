package notify

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
)

// n8nAPI retries executions through n8n's public REST API: POST
// /api/v1/executions/{id}/retry (n8n 1.x and 2.x; the API key needs the
// execution:retry scope). Checked against a real n8n 1.113.3: 200 with the
// new execution ({"id": "2", "mode": "retry", "status": "running", …}),
// 404 {"message": "The execution with the ID \"999\" does not exist."},
// 401 {"message": "unauthorized"}.
type n8nAPI struct {
	base string // e.g. http://n8n:5678/api/v1
	key  string
	hc   *http.Client
}

// n8nRetryTimeout bounds one retry call; n8n answers once the new
// execution started (some versions wait for more of it).
const n8nRetryTimeout = 2 * time.Minute

func newN8nAPI(base, key string) *n8nAPI {
	if base == "" || key == "" {
		return nil
	}
	return &n8nAPI{base: strings.TrimRight(base, "/"), key: key, hc: &http.Client{Timeout: n8nRetryTimeout}}
}

// n8nError is an answer of n8n that is not a success.
type n8nError struct {
	Status  int
	Message string
}

func (e *n8nError) Error() string { return fmt.Sprintf("n8n answered %d: %s", e.Status, e.Message) }

// retry starts the execution again with the workflow as it is saved now
// (the fix is usually in the workflow) and returns the new execution's id.
func (n *n8nAPI) retry(ctx context.Context, executionID string) (string, error) {
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
		return "", &n8nError{Status: resp.StatusCode, Message: truncate(cmpOr(e.Message, http.StatusText(resp.StatusCode)), 200)}
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

// retryExecution carries out "Retry execution" for r. It returns the
// answer for the person and false when nothing changed.
func (s *Service) retryExecution(ctx context.Context, r *record) (newID, msg string, ok bool) {
	if s.n8n == nil || r.Kind != KindWorkflowFailed || r.ExecutionID == "" {
		return "", "This n8n-guard cannot retry executions (N8N_API_URL and N8N_API_KEY are not set); nothing changed.", false
	}
	if r.Decision == DecisionRetried {
		return "", fmt.Sprintf("Already retried: %s. Nothing changed.", decisionText(r)), false
	}
	id, err := s.n8n.retry(ctx, r.ExecutionID)
	var ne *n8nError
	switch {
	case errors.As(err, &ne) && ne.Status == http.StatusNotFound:
		return "", fmt.Sprintf("n8n does not know execution %s (deleted, or the API key may not run this workflow); nothing changed.", escapeMrkdwn(r.ExecutionID)), false
	case errors.As(err, &ne) && ne.Status == http.StatusConflict:
		return "", "n8n refused to retry: " + escapeMrkdwn(ne.Message) + ". Nothing changed.", false
	case errors.As(err, &ne) && (ne.Status == http.StatusUnauthorized || ne.Status == http.StatusForbidden):
		s.log.Error("n8n refused the API key for a retry (check N8N_API_KEY and its execution:retry scope)", "status", ne.Status)
		return "", "n8n refused n8n-guard's API key; the operator must fix N8N_API_KEY. Nothing changed.", false
	case err != nil:
		s.log.Warn("retrying an execution in n8n failed", "execution", r.ExecutionID, "err", err)
		return "", "n8n did not confirm the retry (" + escapeMrkdwn(truncate(err.Error(), 200)) +
			"). Check its executions list before trying again: it may have started.", false
	}
	return id, "", true
}
