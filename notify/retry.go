package notify

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Executions is n8n's public API as notify uses it; package n8n's Client
// is one. Retry starts a failed execution again with the workflow as it is
// saved now (the fix is usually in the workflow) and returns the new
// execution's id.
type Executions interface {
	RetryExecution(ctx context.Context, executionID string) (newID string, err error)
}

// n8nRefusal is an answer of n8n that is not a success, as the client
// reports it (n8n.Error): the HTTP status and n8n's own message.
type n8nRefusal interface {
	error
	StatusCode() int
	Reason() string
}

// n8nRetryTimeout bounds one retry call; n8n answers once the new
// execution started (some versions wait for more of it).
const n8nRetryTimeout = 2 * time.Minute

// The refusals of n8n's that the person is told about in their own words.
const (
	n8nUnauthorized = 401
	n8nForbidden    = 403
	n8nNotFound     = 404
	n8nConflict     = 409
)

// retryExecution carries out "Retry execution" for r. It returns the
// answer for the person and false when nothing changed.
func (s *Service) retryExecution(ctx context.Context, r *record) (newID, msg string, ok bool) {
	if s.n8n == nil || r.Kind != KindWorkflowFailed || r.ExecutionID == "" {
		return "", "This n8n-guard cannot retry executions (N8N_API_URL and N8N_API_KEY are not set); nothing changed.", false
	}
	if r.Decision == DecisionRetried {
		return "", fmt.Sprintf("Already retried: %s. Nothing changed.", decisionText(r)), false
	}
	rctx, cancel := context.WithTimeout(ctx, n8nRetryTimeout)
	defer cancel()
	id, err := s.n8n.RetryExecution(rctx, r.ExecutionID)
	var ne n8nRefusal
	refused := errors.As(err, &ne)
	switch {
	case refused && ne.StatusCode() == n8nNotFound:
		return "", fmt.Sprintf("n8n does not know execution %s (deleted, or the API key may not run this workflow); nothing changed.", escapeMrkdwn(r.ExecutionID)), false
	case refused && ne.StatusCode() == n8nConflict:
		return "", "n8n refused to retry: " + escapeMrkdwn(truncate(ne.Reason(), 200)) + ". Nothing changed.", false
	case refused && (ne.StatusCode() == n8nUnauthorized || ne.StatusCode() == n8nForbidden):
		s.log.Error("n8n refused the API key for a retry (check N8N_API_KEY and its execution:retry scope)", "status", ne.StatusCode())
		return "", "n8n refused n8n-guard's API key; the operator must fix N8N_API_KEY. Nothing changed.", false
	case err != nil:
		s.log.Warn("retrying an execution in n8n failed", "execution", r.ExecutionID, "err", err)
		return "", "n8n did not confirm the retry (" + escapeMrkdwn(truncate(err.Error(), 200)) +
			"). Check its executions list before trying again: it may have started.", false
	}
	return id, "", true
}
