package n8n

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// Retrier is the client as notify's "Retry execution" button uses it
// (notify.Executions): n8n's refusals become notify's RetryError, so notify
// can tell the person in its own words without speaking HTTP.
type Retrier struct{ *Client }

// Retry starts the execution again (RetryExecution) and maps n8n's refusal.
func (r Retrier) Retry(ctx context.Context, executionID string) (string, error) {
	id, err := r.RetryExecution(ctx, executionID)
	var ne *Error
	if !errors.As(err, &ne) {
		return id, err
	}
	switch ne.Status {
	case http.StatusNotFound:
		return "", &notify.RetryError{Refusal: notify.RetryNotFound, Message: ne.Message}
	case http.StatusConflict:
		return "", &notify.RetryError{Refusal: notify.RetryConflict, Message: ne.Message}
	case http.StatusUnauthorized, http.StatusForbidden:
		return "", &notify.RetryError{Refusal: notify.RetryUnauthorized, Message: fmt.Sprintf("%d %s", ne.Status, ne.Message)}
	}
	return "", err
}

// Rerunner is the client as the guard's re-runs use it (rerun.Executions):
// a 4xx of n8n is its refusal (*rerun.Refused), anything else may pass.
type Rerunner struct{ *Client }

// Retry starts the execution again (RetryExecution).
func (r Rerunner) Retry(ctx context.Context, executionID string) (string, error) {
	id, err := r.RetryExecution(ctx, executionID)
	var ne *Error
	if errors.As(err, &ne) && ne.Status >= 400 && ne.Status < 500 {
		return "", &rerun.Refused{Status: ne.Status, Message: ne.Message}
	}
	return id, err
}
