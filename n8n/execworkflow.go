package n8n

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// ExecutionWorkflow is the workflow execution id belongs to, as n8n has
// it: its id (GET /api/v1/executions/{id} without its data, 1.x and 2.x;
// the key needs the execution:read scope) and its name (WorkflowName). A
// failure posted to the guard names its workflow and execution in words
// whoever holds a reserve token chose: what a Slack button does with the
// execution follows n8n's answer, never the post's. A refusal is an *Error.
func (c *Client) ExecutionWorkflow(ctx context.Context, id string) (workflowID, name string, err error) {
	var ex struct {
		WorkflowID any `json:"workflowId"` // a string in n8n 2.x, a number in some 1.x
	}
	if err := c.Do(ctx, http.MethodGet, "/executions/"+url.PathEscape(id)+"?includeData=false", nil, &ex); err != nil {
		return "", "", err
	}
	if ex.WorkflowID == nil {
		return "", "", fmt.Errorf("n8n's execution %s names no workflow", id)
	}
	workflowID = fmt.Sprint(ex.WorkflowID)
	name, err = c.WorkflowName(ctx, workflowID)
	return workflowID, name, err
}
