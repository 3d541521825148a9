package n8n

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/rerun"
)

// ReserveNodePrefix, then a node's name, is the name of the reserve node
// `n8n-guard n8n guard` puts in front of that node (n8nsetup writes it):
// ExecutionStop reads the keys a re-run gate holds from that node's output.
const ReserveNodePrefix = "n8n-guard: reserve "

// RetryExecution starts execution id again with the workflow as it is
// saved now (the fix is usually in the workflow) and returns the new
// execution's id: POST /api/v1/executions/{id}/retry (1.x and 2.x; the key
// needs the execution:retry scope). Checked against a real n8n 1.113.3:
// 200 with the new execution ({"id": "2", "mode": "retry", "status":
// "running", …}), 404 {"message": "The execution with the ID \"999\" does
// not exist."}, 401 {"message": "unauthorized"}; each refusal is an *Error.
func (c *Client) RetryExecution(ctx context.Context, id string) (string, error) {
	var raw json.RawMessage
	err := c.Do(ctx, http.MethodPost, "/executions/"+url.PathEscape(id)+"/retry", map[string]bool{"loadWorkflow": true}, &raw)
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
	type item struct {
		JSON json.RawMessage `json:"json"` // any shape: read below, leniently
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
	if err := c.Do(ctx, http.MethodGet, "/executions/"+url.PathEscape(id)+"?includeData=true", nil, &ex); err != nil {
		return Stop{}, err
	}
	st := Stop{Status: ex.Status, LastNode: ex.Data.ResultData.LastNodeExecuted, Reserved: map[string]bool{}}
	if ex.WorkflowID != nil {
		st.Workflow = fmt.Sprint(ex.WorkflowID)
	}
	// The keys the gate's own reserve node answered for: a node whose
	// output is the guard's answer, never the event's data (which a
	// sender writes, and an item node hands on).
	gated, ok := strings.CutPrefix(st.LastNode, rerun.GateNodePrefix)
	if !ok {
		return st, nil
	}
	for _, run := range ex.Data.ResultData.RunData[ReserveNodePrefix+gated] {
		for _, out := range run.Data.Main {
			for _, it := range out {
				if ns, key, ok := guardAnswer(it.JSON, true); ok {
					st.Reserved[ns+"\x00"+key] = true
				}
			}
		}
	}
	return st, nil
}

// guardAnswer reads an item's json as the guard's answer (outcome,
// namespace and key), flat or (orBody) as the body of a full response. Any other
// item (a text body, another API's fields, a number where a string was
// expected) is simply not one: it never fails the read of the execution.
func guardAnswer(raw json.RawMessage, orBody bool) (ns, key string, ok bool) {
	var it struct {
		Namespace, Key, Outcome any
		Body                    json.RawMessage
	}
	if json.Unmarshal(raw, &it) != nil {
		return "", "", false
	}
	ns, nok := it.Namespace.(string)
	key, kok := it.Key.(string)
	outcome, ook := it.Outcome.(string)
	if nok && kok && ook && ns != "" && key != "" && outcome != "" {
		return ns, key, true
	}
	if orBody && len(it.Body) > 0 && it.Body[0] == '{' {
		return guardAnswer(it.Body, false)
	}
	return "", "", false
}

// retriesPages bounds the pages RetriedAs reads per status (each page one
// call against n8n's API, beside the re-runs' read cap): a retry starts
// after the execution it retries and n8n lists the newest first, so it is
// on the first pages unless the workflow ran 500 times since.
const retriesPages = 5

// retrySkew is how far n8n's clock may be behind the guard's when
// RetriedAs compares a retry's startedAt with the grant: a retry n8n
// started that much before the grant still counts as the grant's.
const retrySkew = 30 * time.Second

// RetriedAs is the id of an execution that n8n started at or after since
// as a retry of execution id of workflow ("" when none): GET
// /api/v1/executions?workflowId=…, whose items carry retryOf (1.x and 2.x;
// the key needs the execution:list scope). n8n leaves the executions that
// run now out of that list unless asked for status=running, and a retry
// that has not reached its gate yet is running: both are read. It tells a
// guard that n8n re-ran an execution already, when the guard that asked
// stopped before it noted n8n's answer. A refusal is an *Error.
func (c *Client) RetriedAs(ctx context.Context, workflow, id string, since time.Time) (string, error) {
	for _, status := range []string{"running", ""} {
		found, err := c.retryIn(ctx, workflow, id, status, since)
		var ne *Error
		if status != "" && errors.As(err, &ne) && ne.Status == http.StatusBadRequest {
			continue // an n8n that cannot filter by status lists every execution
		}
		if err != nil || found != "" {
			return found, err
		}
	}
	return "", nil
}

// retryIn looks for the retry RetriedAs names among the executions of
// workflow of one status ("": n8n's default list), newest first.
func (c *Client) retryIn(ctx context.Context, workflow, id, status string, since time.Time) (string, error) {
	type listed struct {
		ID        any    `json:"id"`      // a string in n8n 2.x, a number in some 1.x
		RetryOf   any    `json:"retryOf"` // likewise; null for a first run
		StartedAt string `json:"startedAt"`
	}
	cursor := ""
	for range retriesPages {
		q := url.Values{"workflowId": {workflow}, "limit": {"100"}}
		if status != "" {
			q.Set("status", status)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Data       []listed `json:"data"`
			NextCursor *string  `json:"nextCursor"`
		}
		if err := c.Do(ctx, http.MethodGet, "/executions?"+q.Encode(), nil, &page); err != nil {
			return "", err
		}
		older := false
		for _, ex := range page.Data {
			exID := idString(ex.ID)
			if ex.RetryOf != nil && idString(ex.RetryOf) == id && exID != "" && !startedBefore(ex.StartedAt, since.Add(-retrySkew)) {
				return exID, nil
			}
			older = older || numericallyBefore(exID, id)
		}
		if older || page.NextCursor == nil || *page.NextCursor == "" {
			return "", nil // past the executions that began before id: a retry is newer
		}
		cursor = *page.NextCursor
	}
	return "", nil
}

func idString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// numericallyBefore reports whether execution a began before b, where
// both are n8n's increasing numeric ids.
func numericallyBefore(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// startedBefore reports whether n8n's startedAt is before since (an
// unreadable or missing time is not: it is counted as a retry).
func startedBefore(startedAt string, since time.Time) bool {
	at, err := time.Parse(time.RFC3339Nano, startedAt)
	return err == nil && at.Before(since)
}
