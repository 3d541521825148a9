package notify_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	n8nclient "github.com/n8n-guard/n8n-guard/n8n"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// fakeN8n answers POST /api/v1/executions/{id}/retry as n8n's public API
// does (the answers are those of a real n8n 1.113.3): 401 without the
// key, 404 for an execution it does not know, 409 for one still queued,
// else the new execution, started.
//
// It also answers GET /api/v1/executions/{id} (the execution's workflowId:
// execs, else "id-orders-sync", failureBody's) and GET
// /api/v1/workflows/{id} (its name: id without "id-"), as the check of
// whose execution a failure names asks.
type fakeN8n struct {
	srv     *httptest.Server
	mu      sync.Mutex
	retries []string
	execs   map[string]string // execution id -> workflow id
	reads   int               // GETs of executions
}

func newFakeN8n(t *testing.T) *fakeN8n {
	f := &fakeN8n{execs: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/executions/"), "/retry")
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		switch {
		case r.Header.Get("X-N8N-API-KEY") != "n8n-key":
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"message": "unauthorized"})
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/executions/"):
			f.mu.Lock()
			f.reads++
			wf := cmpOr(f.execs[id], "id-orders-sync")
			f.mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"id": id, "workflowId": wf, "status": "error", "finished": false})
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/workflows/"):
			wf := strings.TrimPrefix(r.URL.Path, "/api/v1/workflows/")
			json.NewEncoder(w).Encode(map[string]any{"id": wf, "name": strings.TrimPrefix(wf, "id-")})
		case r.Method != http.MethodPost || !ok:
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"message": "not found"})
		case id == "404":
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"message": `The execution with the ID "404" does not exist.`})
		case id == "409":
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"message": "The execution is queued and cannot be retried"})
		default:
			f.mu.Lock()
			f.retries = append(f.retries, fmt.Sprintf("%s loadWorkflow=%v", id, body["loadWorkflow"]))
			f.mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"id": "9" + id, "mode": "retry", "retryOf": id,
				"status": "running", "finished": false, "workflowId": "w1"})
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// belongs says that n8n holds execution exec of workflow wf.
func (f *fakeN8n) belongs(exec, wf string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs[exec] = wf
}

func (f *fakeN8n) Retries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.retries...)
}

func TestRetryExecutionButton(t *testing.T) {
	cases := []struct {
		name, user, exec string
		retried          bool
		answer           string // ephemeral, when nothing changed
	}{
		{"owner retries", "U0ORDERS", "77", true, ""},
		{"stranger retries", "U0STRANGER", "77", false, "Not allowed — ask <@U0ORDERS>"},
		{"execution n8n does not know", "U0ORDERS", "404", false, "n8n does not know execution 404"},
		{"execution still queued", "U0ORDERS", "409", false, "n8n refused to retry: The execution is queued"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n8n := newFakeN8n(t)
			k := newKeysHarness(t)
			k.setExecutions(n8nclient.Retrier{Client: n8nclient.New(n8n.srv.URL+"/api/v1", "n8n-key", 0)})
			a := k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", tc.exec))
			k.pass()
			if post := k.calls("chat.postMessage")[0]; !strings.Contains(post.Raw, ActionRerun) {
				t.Fatalf("no Retry execution button:\n%s", post.Blocks)
			}
			k.click(tc.user, ActionRerun, a.NotificationID)
			updates, eph := k.calls("chat.update"), k.calls("chat.postEphemeral")
			if !tc.retried {
				if len(updates) != 0 || len(eph) != 1 || !strings.Contains(eph[0].Text, tc.answer) {
					t.Fatalf("updates %d, ephemeral %+v", len(updates), eph)
				}
				if tc.user == "U0STRANGER" && len(n8n.Retries()) != 0 {
					t.Fatal("a stranger's click reached n8n")
				}
				return
			}
			// The workflow as saved now: the fix is usually in it.
			if got := n8n.Retries(); len(got) != 1 || got[0] != tc.exec+" loadWorkflow=true" {
				t.Fatalf("n8n retries: %v", got)
			}
			if len(updates) != 1 || !strings.Contains(updates[0].Blocks, "*retried the execution* in n8n") ||
				!strings.Contains(updates[0].Blocks, "new execution 977") || strings.Contains(updates[0].Raw, ActionRerun) {
				t.Fatalf("update: %+v", updates)
			}
			// A second click does not retry twice.
			k.click(tc.user, ActionRerun, a.NotificationID)
			if len(n8n.Retries()) != 1 {
				t.Fatal("retried twice")
			}
		})
	}
	t.Run("no n8n API configured: no button", func(t *testing.T) {
		k := newKeysHarness(t)
		k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "5"))
		k.pass()
		if strings.Contains(k.calls("chat.postMessage")[0].Raw, ActionRerun) {
			t.Fatal("Retry execution shown without n8n's API")
		}
	})
}
