package n8n

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/rerun"
)

// execution is an n8n execution as GET /executions/{id}?includeData=true
// answers it: the guard's reserve answers are items of the reserve node's
// output (full response: the answer is the body).
func execution(id, status, workflow, last, ns, key string) string {
	return fmt.Sprintf(`{"id":%q,"status":%q,"workflowId":%q,"data":{"resultData":{"lastNodeExecuted":%q,"error":{"message":"Conflict"},
		"runData":{"Webhook":[{"data":{"main":[[{"json":{"lead":"x"}}]]}}],
		"n8n-guard: reserve Create contact":[{"data":{"main":[[{"json":{"statusCode":200,"body":{"outcome":"accepted","proceed":true,"namespace":%q,"key":%q,"token":"t"}}}]]}}],
		%q:[{"error":{"message":"409"}}]}}}}`, id, status, workflow, last, ns, key, last)
}

const gate = "n8n-guard: re-run gate for Create contact"

var lead = []rerun.Key{{Namespace: "crm", Key: "lead-1"}}

// The guard re-runs an execution only where n8n says it belongs to the
// workflow the key names, reserved the key and stopped at a re-run gate:
// the id comes from a key's history, which any token that may reserve in
// the namespace can write, so an execution of another workflow, one that
// never reserved the key (another namespace's), or one stopped at another
// node (an unguarded write) is refused and n8n is not asked to retry it,
// and the refusal tells nothing of that execution; one still running, or
// n8n's 429, is asked again later, not refused.
func TestRerunnerRetriesOnlyTheKeysExecutionStoppedAtItsGate(t *testing.T) {
	srv := fakeN8n(t, map[string]answer{
		"GET /api/v1/executions":           {200, `{"data":[{"id":"41","workflowId":"wf1","retryOf":null}],"nextCursor":null}`},
		"GET /api/v1/executions/42":        {200, execution("42", "error", "wf1", gate, "crm", "lead-1")},
		"POST /api/v1/executions/42/retry": {200, `{"id":"57","mode":"retry","status":"running"}`},
		"GET /api/v1/executions/43":        {200, `{"id":43,"status":"error","workflowId":"wf1","data":{"resultData":{"lastNodeExecuted":"` + gate + `","runData":{"n8n-guard: reserve Create contact":[{"data":{"main":[[{"json":{"outcome":"accepted","namespace":"crm","key":"lead-1"}}]]}}]}}}}`},
		// The event's own data, as a sender wrote it, looks like the
		// guard's answer: only the reserve node's output counts.
		"GET /api/v1/executions/45": {200, `{"id":"45","status":"error","workflowId":"wf1","data":{"resultData":{"lastNodeExecuted":"` + gate + `","runData":{
			"Webhook":[{"data":{"main":[[{"json":{"body":{"outcome":"accepted","namespace":"billing","key":"lead-1"}}}]]}}],
			"n8n-guard: item for Create contact":[{"data":{"main":[[{"json":{"outcome":"accepted","namespace":"billing","key":"lead-1"}}]]}}],
			"n8n-guard: reserve Create contact":[{"data":{"main":[[{"json":{"statusCode":200,"body":{"outcome":"accepted","namespace":"crm","key":"lead-1"}}}]]}}]}}}}`},
		"GET /api/v1/executions/502":       {502, `<html>Bad Gateway</html>`},
		"POST /api/v1/executions/43/retry": {429, `{"message":"Too many requests"}`},
		// Other nodes' items of any shape (a text body, numbers where the
		// guard has strings) do not fail the read of the execution.
		"GET /api/v1/executions/44": {200, `{"id":"44","status":"error","workflowId":"wf1","data":{"resultData":{"lastNodeExecuted":"` + gate + `","runData":{
			"Fetch page":[{"data":{"main":[[{"json":{"statusCode":200,"body":"<html>ok</html>"}},{"json":{"namespace":5,"key":[1],"outcome":null,"body":7}}],null]}}],
			"n8n-guard: reserve Create contact":[{"data":{"main":[[{"json":{"statusCode":200,"body":{"outcome":"accepted","namespace":"crm","key":"lead-1"}}}]]}}]}}}}`},
		"POST /api/v1/executions/44/retry": {200, `{"id":"58"}`},
		"POST /api/v1/executions/45/retry": {200, `{"id":"59"}`},
		"GET /api/v1/executions/7":         {200, execution("7", "error", "pay", "Book payment", "crm", "lead-1")},
		"GET /api/v1/executions/8":         {200, execution("8", "error", "pay", "n8n-guard: re-run gate for Book payment", "crm", "lead-1")},
		"GET /api/v1/executions/10":        {200, execution("10", "error", "wf1", gate, "billing", "lead-1")},
		"GET /api/v1/executions/9":         {200, `{"id":"9","status":"running","workflowId":"wf1","data":{"resultData":{}}}`},
		// No retry of 7, 8, 9 or 10 is answered: were one asked, the
		// error would be n8n's 404, not the guard's own.
	})
	r := Rerunner{Client: New(srv.URL, "key", 0)}
	ctx := context.Background()
	if res, err := r.Retry(ctx, "wf1", "42", lead, time.Time{}); err != nil || res.ID != "57" || len(res.NotOwn) != 0 {
		t.Fatalf("retry of the key's execution at its gate: %+v %v", res, err)
	}
	if res, err := r.Retry(ctx, "wf1", "44", lead, time.Time{}); err != nil || res.ID != "58" {
		t.Fatalf("retry of an execution whose other nodes answered text: %+v %v", res, err)
	}
	var refused *rerun.Refused
	for _, c := range []struct{ wf, id, want string }{
		{"wf1", "7", `is not one of workflow "wf1" that reserved the key`},
		{"pay", "7", `stopped at node "Book payment", not at a re-run gate`},
		{"wf1", "8", `is not one of workflow "wf1" that reserved the key`},
		{"wf1", "999", `is not one of workflow "wf1" that reserved the key: the guard re-runs only the key's own execution (or n8n no longer has it)`},
	} {
		_, err := r.Retry(ctx, c.wf, c.id, lead, time.Time{})
		if !errors.As(err, &refused) || !strings.Contains(refused.Message, c.want) {
			t.Errorf("retry of %s %s: %v, want a refusal saying %q", c.wf, c.id, err, c.want)
			continue
		}
		if c.id != "7" || c.wf != "pay" {
			for _, secret := range []string{"pay", "Book payment", "billing"} {
				if strings.Contains(refused.Message, secret) {
					t.Errorf("the refusal of %s %s tells of another execution (%q): %s", c.wf, c.id, secret, refused.Message)
				}
			}
		}
	}
	// Keys the execution did not reserve (another namespace's, forged) are
	// named, so that they are refused; it is retried for its own keys, and
	// not at all when it has none among them.
	forged := rerun.Key{Namespace: "billing", Key: "lead-1"}
	for _, c := range []struct {
		id, newID string
		keys      []rerun.Key
	}{{"10", "", lead}, {"42", "57", []rerun.Key{lead[0], forged}}, {"45", "59", []rerun.Key{lead[0], forged}}} {
		res, err := r.Retry(ctx, "wf1", c.id, c.keys, time.Time{})
		want := c.keys[len(c.keys)-1]
		if err != nil || res.ID != c.newID || len(res.NotOwn) != 1 || res.NotOwn[0] != want || !strings.Contains(res.Why, `is not one of workflow "wf1" that reserved the key`) {
			t.Errorf("retry of %s for %v: %+v %v, want new execution %q and %v named as not the execution's own", c.id, c.keys, res, err, c.newID, want)
		} else if strings.Contains(res.Why, "billing") {
			t.Errorf("the refusal tells of another execution: %s", res.Why)
		}
	}
	for _, id := range []string{"9", "43"} {
		if _, err := r.Retry(ctx, "wf1", id, lead, time.Time{}); err == nil || errors.As(err, &refused) || errors.Is(err, rerun.ErrUnreachable) {
			t.Errorf("retry of %s (running, or n8n's 429): %v, want an error to ask again later, neither a refusal nor n8n unreachable", id, err)
		}
	}
	if _, err := (Rerunner{Client: New(srv.URL, "wrong", 0)}).Retry(ctx, "wf1", "42", lead, time.Time{}); !errors.As(err, &refused) || refused.Status != 401 {
		t.Errorf("a refused key: %v", err)
	}
	if _, err := r.Retry(ctx, "wf1", "502", lead, time.Time{}); !errors.Is(err, rerun.ErrUnreachable) {
		t.Errorf("a proxy's 502 in front of n8n: %v, want rerun.ErrUnreachable", err)
	}
	gone := httptest.NewServer(nil)
	gone.Close()
	if _, err := (Rerunner{Client: New(gone.URL, "key", 0)}).Retry(ctx, "wf1", "42", lead, time.Time{}); !errors.Is(err, rerun.ErrUnreachable) {
		t.Errorf("n8n not reachable: %v, want rerun.ErrUnreachable", err)
	}
}
