package n8n

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/rerun"
)

// The guard re-runs an execution only where n8n says it stopped at a
// re-run gate: the id comes from a key's history, which any token that
// may reserve in the namespace can write, so an execution stopped at
// another node (an unguarded write) is refused, and n8n is not asked to
// retry it.
func TestRerunnerRetriesOnlyAnExecutionStoppedAtItsGate(t *testing.T) {
	srv := fakeN8n(t, map[string]answer{
		"GET /api/v1/executions/42":        {200, `{"id":"42","status":"error","workflowId":"wf1","data":{"resultData":{"lastNodeExecuted":"n8n-guard: re-run gate for Create contact","error":{"message":"Conflict"}}}}`},
		"POST /api/v1/executions/42/retry": {200, `{"id":"57","mode":"retry","status":"running"}`},
		"GET /api/v1/executions/7":         {200, `{"id":7,"status":"error","workflowId":"pay","data":{"resultData":{"lastNodeExecuted":"Book payment"}}}`},
		// No retry of 7 is answered: were it asked, the refusal would be
		// n8n's 404, not the guard's own.
	})
	c := New(srv.URL, "key", 0)
	r := Rerunner{Client: c}
	id, err := r.Retry(context.Background(), "42")
	if err != nil || id != "57" {
		t.Fatalf("retry of an execution at its gate: %q %v", id, err)
	}
	var refused *rerun.Refused
	_, err = r.Retry(context.Background(), "7")
	if !errors.As(err, &refused) || !strings.Contains(refused.Message, `stopped at node "Book payment", not at a re-run gate`) {
		t.Fatalf("retry of an execution stopped elsewhere: %v, want a refusal naming its node", err)
	}
	_, err = r.Retry(context.Background(), "999")
	if !errors.As(err, &refused) || refused.Status != 404 {
		t.Fatalf("retry of an execution n8n does not know: %v, want its 404 as a refusal", err)
	}
	if _, err := (Rerunner{Client: New(srv.URL, "wrong", 0)}).Retry(context.Background(), "42"); !errors.As(err, &refused) || refused.Status != 401 {
		t.Fatalf("a refused key: %v", err)
	}
}
