package n8n

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/rerun"
)

// The guard re-runs an execution only where n8n says it belongs to the
// workflow the key names and stopped at a re-run gate: the id comes from
// a key's history, which any token that may reserve in the namespace can
// write, so an execution of another workflow, or one stopped at another
// node (an unguarded write), is refused and n8n is not asked to retry it;
// one still running is asked again later, not refused.
func TestRerunnerRetriesOnlyTheKeysExecutionStoppedAtItsGate(t *testing.T) {
	srv := fakeN8n(t, map[string]answer{
		"GET /api/v1/executions/42":        {200, `{"id":"42","status":"error","workflowId":"wf1","data":{"resultData":{"lastNodeExecuted":"n8n-guard: re-run gate for Create contact","error":{"message":"Conflict"}}}}`},
		"POST /api/v1/executions/42/retry": {200, `{"id":"57","mode":"retry","status":"running"}`},
		"GET /api/v1/executions/7":         {200, `{"id":7,"status":"error","workflowId":"pay","data":{"resultData":{"lastNodeExecuted":"Book payment"}}}`},
		"GET /api/v1/executions/8":         {200, `{"id":8,"status":"error","workflowId":"pay","data":{"resultData":{"lastNodeExecuted":"n8n-guard: re-run gate for Book payment"}}}`},
		"GET /api/v1/executions/9":         {200, `{"id":"9","status":"running","workflowId":"wf1","data":{"resultData":{}}}`},
		// No retry of 7, 8 or 9 is answered: were one asked, the error
		// would be n8n's 404, not the guard's own.
	})
	r := Rerunner{Client: New(srv.URL, "key", 0)}
	ctx := context.Background()
	if id, err := r.Retry(ctx, "wf1", "42"); err != nil || id != "57" {
		t.Fatalf("retry of the key's execution at its gate: %q %v", id, err)
	}
	var refused *rerun.Refused
	for _, c := range []struct{ wf, id, want string }{
		{"pay", "7", `stopped at node "Book payment", not at a re-run gate`},
		{"wf1", "8", `belongs to workflow "pay", not to "wf1" that the key names`},
		{"wf1", "999", `not found`},
	} {
		if _, err := r.Retry(ctx, c.wf, c.id); !errors.As(err, &refused) || !strings.Contains(refused.Message, c.want) {
			t.Errorf("retry of %s %s: %v, want a refusal saying %q", c.wf, c.id, err, c.want)
		}
	}
	if _, err := r.Retry(ctx, "wf1", "9"); err == nil || errors.As(err, &refused) {
		t.Errorf("retry of a running execution: %v, want an error to ask again later, not a refusal", err)
	}
	if _, err := (Rerunner{Client: New(srv.URL, "wrong", 0)}).Retry(ctx, "wf1", "42"); !errors.As(err, &refused) || refused.Status != 401 {
		t.Errorf("a refused key: %v", err)
	}
}
