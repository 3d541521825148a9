package n8n

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

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

// Retry starts execution id of workflow again (RetryExecution), but only
// one of that workflow that stopped at a re-run gate and reserved every
// key of keys: the execution comes from the key's history, which the
// gate's reserve wrote with any owner its token chose, so a key may name
// an execution of another namespace's workflow. Such an execution, and one
// stopped at another node (it would be retried there, unguarded), is
// refused without saying more of it; one still running is left for
// later.
func (r Rerunner) Retry(ctx context.Context, workflow, id string, keys []rerun.Key) (string, error) {
	st, err := r.ExecutionStop(ctx, id)
	if err != nil {
		return "", refusal(err)
	}
	notOwn := fmt.Sprintf("execution %s is not one of workflow %q that reserved the key: the guard re-runs only the key's own execution", id, workflow)
	switch {
	case st.Workflow != workflow:
		return "", &rerun.Refused{Status: http.StatusConflict, Message: notOwn}
	case st.Status == "new" || st.Status == "running" || st.Status == "waiting":
		return "", fmt.Errorf("execution %s is %s in n8n: asked again later", id, st.Status)
	}
	var others []rerun.Key
	for _, k := range keys {
		if !st.Reserved[k.Namespace+"\x00"+k.Key] {
			others = append(others, k)
		}
	}
	if len(others) > 0 {
		return "", &rerun.NotOwn{Keys: others, Message: notOwn}
	}
	switch {
	case !strings.HasPrefix(st.LastNode, GatePrefix):
		return "", &rerun.Refused{Status: http.StatusConflict, Message: fmt.Sprintf(
			"execution %s (%s) stopped at node %q, not at a re-run gate: the guard re-runs only an execution that waits at its gate", id, st.Status, st.LastNode)}
	}
	id, err = r.RetryExecution(ctx, id)
	return id, refusal(err)
}

// refusal makes n8n's 4xx a *rerun.Refused, except 408 and 429 (try
// again later), and marks a failure to reach n8n as rerun.ErrUnreachable.
func refusal(err error) error {
	var ne *Error
	switch {
	case errors.As(err, &ne) && ne.Status >= 400 && ne.Status < 500 && ne.Status != http.StatusRequestTimeout && ne.Status != http.StatusTooManyRequests:
		return &rerun.Refused{Status: ne.Status, Message: ne.Message}
	case errors.Is(err, ErrUnreachable):
		return fmt.Errorf("%w: %w", rerun.ErrUnreachable, err)
	}
	return err
}
