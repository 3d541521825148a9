package n8n

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// RetryExecution starts execution id again with the workflow as it is
// saved now (the fix is usually in the workflow) and returns the new
// execution's id: POST /api/v1/executions/{id}/retry (1.x and 2.x; the key
// needs the execution:retry scope). Checked against a real n8n 1.113.3:
// 200 with the new execution ({"id": "2", "mode": "retry", "status":
// "running", …}), 404 {"message": "The execution with the ID \"999\" does
// not exist."}, 401 {"message": "unauthorized"}; each refusal is an *Error.
func (c *Client) RetryExecution(ctx context.Context, id string) (string, error) {
	var raw json.RawMessage
	err := c.do(ctx, http.MethodPost, "/executions/"+url.PathEscape(id)+"/retry", map[string]bool{"loadWorkflow": true}, &raw)
	if err != nil {
		return "", err
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

// ExecutionStop says where an execution stopped: its workflow, its
// status and the last node it ran (GET /api/v1/executions/{id}
// ?includeData=true, 1.x and 2.x; the key needs the execution:read
// scope). A refusal is an *Error.
func (c *Client) ExecutionStop(ctx context.Context, id string) (workflow, status, lastNode string, err error) {
	var ex struct {
		WorkflowID any    `json:"workflowId"` // a string in n8n 2.x, a number in some 1.x
		Status     string `json:"status"`
		Data       struct {
			ResultData struct {
				LastNodeExecuted string `json:"lastNodeExecuted"`
			} `json:"resultData"`
		} `json:"data"`
	}
	if err := c.do(ctx, http.MethodGet, "/executions/"+url.PathEscape(id)+"?includeData=true", nil, &ex); err != nil {
		return "", "", "", err
	}
	if ex.WorkflowID != nil {
		workflow = fmt.Sprint(ex.WorkflowID)
	}
	return workflow, ex.Status, ex.Data.ResultData.LastNodeExecuted, nil
}
