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

// Stop is where an execution stopped (ExecutionStop).
type Stop struct {
	Workflow, Status, LastNode string
	// Reserved are the keys ("namespace\x00key") the guard answered in
	// this execution: an item of a node's output that carries the guard's
	// answer (flat, or as the body of a full response).
	Reserved map[string]bool
}

// ExecutionStop says where an execution stopped: its workflow, its
// status, the last node it ran and the keys it reserved (GET
// /api/v1/executions/{id}?includeData=true, 1.x and 2.x; the key needs
// the execution:read scope). A refusal is an *Error.
func (c *Client) ExecutionStop(ctx context.Context, id string) (Stop, error) {
	type answer struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
		Outcome   string `json:"outcome"`
	}
	type item struct {
		JSON struct {
			answer
			Body *answer `json:"body"`
		} `json:"json"`
	}
	var ex struct {
		WorkflowID any    `json:"workflowId"` // a string in n8n 2.x, a number in some 1.x
		Status     string `json:"status"`
		Data       struct {
			ResultData struct {
				LastNodeExecuted string `json:"lastNodeExecuted"`
				RunData          map[string][]struct {
					Data struct {
						Main [][]item `json:"main"`
					} `json:"data"`
				} `json:"runData"`
			} `json:"resultData"`
		} `json:"data"`
	}
	if err := c.do(ctx, http.MethodGet, "/executions/"+url.PathEscape(id)+"?includeData=true", nil, &ex); err != nil {
		return Stop{}, err
	}
	st := Stop{Status: ex.Status, LastNode: ex.Data.ResultData.LastNodeExecuted, Reserved: map[string]bool{}}
	if ex.WorkflowID != nil {
		st.Workflow = fmt.Sprint(ex.WorkflowID)
	}
	for _, runs := range ex.Data.ResultData.RunData {
		for _, run := range runs {
			for _, out := range run.Data.Main {
				for _, it := range out {
					for _, a := range []*answer{&it.JSON.answer, it.JSON.Body} {
						if a != nil && a.Outcome != "" && a.Namespace != "" && a.Key != "" {
							st.Reserved[a.Namespace+"\x00"+a.Key] = true
						}
					}
				}
			}
		}
	}
	return st, nil
}
