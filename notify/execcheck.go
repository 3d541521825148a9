package notify

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A failure reaches the guard as a post to /v1/n8n/error, and any reserve
// token may post one: the workflow id, its name and the execution id are
// the sender's words. The name routes the message (owners:), so a forged
// post could put another team's execution before a person who may decide
// this team's failures. So "Retry execution" is offered, and carried out,
// only for an execution n8n says belongs to the workflow the failure
// names, by id and by name: what the button acts on is then routed by
// n8n's words. Without n8n's API no button is offered at all.

// executionOK is ExecutionChecked of an execution n8n says is the
// failure's.
const executionOK = "ok"

// executionCheckTimeout bounds the question to n8n before a delivery.
const executionCheckTimeout = 10 * time.Second

// retryOffered says whether r's message offers "Retry execution": asked
// of n8n once per notification (the answer is kept on it), and not
// offered while n8n cannot be asked.
func (s *Service) retryOffered(ctx context.Context, r *Record) bool {
	if s.opts.Executions == nil || r.Kind != KindWorkflowFailed || r.ExecutionID == "" {
		return false
	}
	if r.ExecutionChecked != "" {
		return r.ExecutionChecked == executionOK
	}
	// Delivery waits for the answer: a slow n8n must not hold every
	// other message back for the client's two minutes.
	ctx, cancel := context.WithTimeout(ctx, executionCheckTimeout)
	defer cancel()
	why, err := ExecutionMismatch(ctx, s.opts.Executions, r)
	if err != nil {
		s.log.Warn("cannot ask n8n whose execution a failure names; its message offers no Retry execution for now",
			"id", r.ID, "execution", r.ExecutionID, "err", err)
		return false
	}
	checked := executionOK
	if why != "" {
		checked = why
		s.log.Warn("a failure names an execution of another workflow than n8n says; its message offers no Retry execution",
			"id", r.ID, "workflow", r.WorkflowID, "workflow_name", r.WorkflowName, "execution", r.ExecutionID, "why", why)
	}
	if _, err := s.outbox.Update(ctx, r.ID, func(x *Record) { x.ExecutionChecked = checked }); err != nil {
		s.log.Warn("cannot keep n8n's answer on a notification; asked again at its next delivery", "id", r.ID, "err", err)
	}
	r.ExecutionChecked = checked
	return checked == executionOK
}

// ExecutionMismatch asks n8n (ex) which workflow r's execution belongs to: ""
// when it is the workflow r names (id and name), else
// why not, in words for the person; an error when n8n could not say. The
// name must be the one n8n gives: a failure without one is offered no
// Retry execution.
func ExecutionMismatch(ctx context.Context, ex Executions, r *Record) (string, error) {
	id, name, err := ex.WorkflowOf(ctx, r.ExecutionID)
	var re *RetryError
	switch {
	case errors.As(err, &re) && re.Refusal == RetryNotFound:
		return fmt.Sprintf("n8n does not know execution %s", r.ExecutionID), nil
	case err != nil:
		return "", err
	case id != r.WorkflowID || name != r.WorkflowName:
		// The name too, always: a failure is routed by its workflow's
		// name, and one that leaves the name out goes to an id rule or
		// the default owner, whoever's workflow it names.
		// n8n's names of the other workflow are not repeated: the sender
		// of a forged failure must not learn them from the answer.
		return fmt.Sprintf("execution %s is not one of workflow %q, which this failure names", r.ExecutionID, cmpOr(r.WorkflowName, r.WorkflowID)), nil
	}
	return "", nil
}
