package n8n

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
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

// WorkflowOf is the workflow n8n says execution executionID belongs to
// (ExecutionWorkflow), n8n's refusal mapped as Retry's.
func (r Retrier) WorkflowOf(ctx context.Context, executionID string) (id, name string, err error) {
	id, name, err = r.ExecutionWorkflow(ctx, executionID)
	var ne *Error
	if errors.As(err, &ne) && ne.Status == http.StatusNotFound {
		return "", "", &notify.RetryError{Refusal: notify.RetryNotFound, Message: ne.Message}
	}
	return id, name, err
}

// Rerunner is the client as the guard's re-runs use it (rerun.Executions):
// a 4xx of n8n is its refusal (*rerun.Refused), anything else may pass.
type Rerunner struct{ *Client }

// Retry starts execution id of workflow again (RetryExecution), but only
// one of that workflow that stopped at a re-run gate, and only for the
// keys of keys it reserved: the execution comes from the key's history,
// which the gate's reserve wrote with any owner its token chose, so a key
// may name an execution of another namespace's workflow. The keys it did
// not reserve come back as NotOwn, said without more of that execution;
// an execution of another workflow is refused the same way, one stopped
// at another node (it would be retried there, unguarded) is refused
// naming it, one still running is left for later.
func (r Rerunner) Retry(ctx context.Context, workflow, id string, keys []rerun.Key, since time.Time) (rerun.Retried, error) {
	notOwn := fmt.Sprintf("execution %s is not one of workflow %q that reserved the key: the guard re-runs only the key's own execution", id, workflow)
	// The reads end at a stop (the grace is for the retry's POST alone):
	// one cut by it asked nothing, and the claims go back.
	read, done := calls.Reading(ctx)
	defer done()
	st, err := r.ExecutionStop(read, id)
	if errors.Is(context.Cause(read), calls.ErrStopped) {
		return rerun.Retried{}, calls.ErrStopped
	}
	var ne *Error
	switch {
	case errors.As(err, &ne) && ne.Status == http.StatusNotFound:
		// Said as for an execution of another workflow: a key's holder
		// must not tell its writer which executions exist.
		return rerun.Retried{}, &rerun.Refused{Status: http.StatusNotFound, Message: notOwn + " (or n8n no longer has it)"}
	case errors.Is(err, ErrTooLarge):
		return rerun.Retried{}, &rerun.Refused{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf(
			"execution %s is too large for the guard to check (%v): allow a retry without re-run, then press Retry on it in n8n", id, ErrTooLarge)}
	case err != nil:
		return rerun.Retried{}, refusal(err)
	}
	switch {
	case st.Workflow != workflow:
		return rerun.Retried{}, &rerun.Refused{Status: http.StatusConflict, Message: notOwn}
	case st.Status == "new" || st.Status == "running" || st.Status == "waiting":
		return rerun.Retried{}, fmt.Errorf("execution %s is %s in n8n: asked again later", id, st.Status)
	case !strings.HasPrefix(st.LastNode, rerun.GateNodePrefix):
		return rerun.Retried{}, &rerun.Refused{Status: http.StatusConflict, Message: fmt.Sprintf(
			"execution %s (%s) stopped at node %q, not at a re-run gate: the guard re-runs only an execution that waits at its gate", id, st.Status, st.LastNode)}
	}
	var others []rerun.Key
	for _, k := range keys {
		if !st.Reserved[k.Namespace+"\x00"+k.Key] {
			others = append(others, k)
		}
	}
	res := rerun.Retried{NotOwn: others, Why: notOwn}
	if len(others) == len(keys) {
		return res, nil // none of them its own: nothing to re-run
	}
	// A retry of it that n8n started since the grant is this re-run's: a
	// guard asked, and stopped or lost the answer before noting it.
	found, err := r.RetriedAs(read, workflow, id, since)
	switch {
	case errors.Is(context.Cause(read), calls.ErrStopped):
		return rerun.Retried{}, calls.ErrStopped
	case errors.As(err, &ne) && (ne.Status == http.StatusUnauthorized || ne.Status == http.StatusForbidden):
		// A key that may retry but not list (no execution:list scope):
		// asked without knowing of an earlier ask (as before this check).
		res.Unchecked = true
	case err != nil:
		return res, refusal(err)
	case found != "":
		res.ID, res.Earlier = found, true
		return res, nil
	}
	if calls.Stopped(ctx) {
		// The guard is stopping (SIGTERM) and nothing was asked yet: a
		// retry posted now would outlive the guard's note of it.
		return rerun.Retried{}, calls.ErrStopped
	}
	res.ID, err = r.RetryExecution(ctx, id)
	return res, refusal(err)
}

// refusal makes n8n's 4xx a *rerun.Refused, except 408 and 429 (try
// again later), and marks as rerun.ErrUnreachable a failure to reach n8n,
// a redirect (N8N_API_URL names another address: true of every call) and
// a proxy's 502, 503 or 504 (n8n behind it is down).
func refusal(err error) error {
	var ne *Error
	isErr := errors.As(err, &ne)
	switch {
	case isErr && ne.Status >= 400 && ne.Status < 500 && ne.Status != http.StatusRequestTimeout && ne.Status != http.StatusTooManyRequests:
		return &rerun.Refused{Status: ne.Status, Message: ne.Message}
	case errors.Is(err, ErrUnreachable),
		isErr && (ne.Status/100 == 3 || ne.Status == http.StatusBadGateway || ne.Status == http.StatusServiceUnavailable || ne.Status == http.StatusGatewayTimeout):
		return fmt.Errorf("%w: %w", rerun.ErrUnreachable, err)
	}
	return err
}
