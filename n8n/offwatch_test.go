package n8n

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// offN8n is a stand-in for n8n's public API as OffWatch reads it: the
// workflow list in pages of two whatever limit asks (n8n pages with
// nextCursor), a 401 while the key is revoked, and each workflow's newest
// executions.
type offN8n struct {
	mu      sync.Mutex
	wfs     []map[string]any
	runs    map[string][]string // workflow id → modes of its executions
	revoked bool
	calls   []string // method and path of every call
}

func (n *offN8n) handle(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, r.URL.Path)
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	if n.revoked || r.Header.Get("X-N8N-API-KEY") != "key" {
		reply(http.StatusUnauthorized, map[string]any{"message": "unauthorized"})
		return
	}
	switch r.URL.Path {
	case "/api/v1/workflows":
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		to := min(from+2, len(n.wfs))
		var next any
		if to < len(n.wfs) {
			next = strconv.Itoa(to)
		}
		reply(200, map[string]any{"data": n.wfs[from:to], "nextCursor": next})
	case "/api/v1/executions":
		var data []map[string]any
		for i, m := range n.runs[r.URL.Query().Get("workflowId")] {
			data = append(data, map[string]any{"id": fmt.Sprint(i), "mode": m})
		}
		reply(200, map[string]any{"data": data, "nextCursor": nil})
	default:
		reply(404, map[string]any{"message": "not found"})
	}
}

// set turns a workflow on or off as n8n 2.x shows it (activeVersionId),
// n8n bumping updatedAt.
func (n *offN8n) set(id string, on bool, updated string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.wfs {
		if w["id"] == id {
			w["activeVersionId"], w["active"], w["updatedAt"] = nil, on, updated
			if on {
				w["activeVersionId"] = "v1"
			}
		}
	}
}

func (n *offN8n) listCalls() (list, executions int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.calls {
		switch c {
		case "/api/v1/workflows":
			list++
		case "/api/v1/executions":
			executions++
		}
	}
	n.calls = nil
	return list, executions
}

// OffWatch tells the owner of a workflow holding a guarded write once when
// n8n turns it off; reads the list page by page and nothing per workflow
// after its first look; says once that a revoked key stops the watch, and
// that it is back; tells at its first read of a workflow off already that
// n8n ran before, not of one never run; and tells again only of a new time
// off.
// leadToCRM is the shipped lead example's id: its nodes hold a guarded write.
const leadToCRM = "n8nGuardLeadCrm1"

func TestOffWatchTellsTheOwnerOnceWhenN8nTurnsAWorkflowOff(t *testing.T) {
	shipped, err := workflows.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	var guarded workflows.Workflow
	for _, wf := range shipped {
		if wf.ID == leadToCRM {
			guarded = wf
		}
	}
	n := &offN8n{runs: map[string][]string{"G-crashed": {"webhook", "webhook"}, "G-example": {"manual"}}}
	add := func(id string, on bool, nodes []map[string]any) {
		n.wfs = append(n.wfs, map[string]any{"id": id, "name": "wf " + id, "nodes": nodes, "connections": map[string]any{}, "settings": map[string]any{}})
		n.set(id, on, "t0")
	}
	add("G-running", true, guarded.Nodes)
	add("G-crashed", false, guarded.Nodes) // turned off before the guard started
	add("G-example", false, guarded.Nodes) // never published
	add("U-plain", true, []map[string]any{{"name": "Set", "type": "n8n-nodes-base.set"}})
	add("U-off", false, []map[string]any{{"name": "Set", "type": "n8n-nodes-base.set"}})
	srv := httptest.NewServer(http.HandlerFunc(n.handle))
	t.Cleanup(srv.Close)

	var told []Off
	var logs bytes.Buffer
	w := &OffWatch{Client: New(srv.URL, "key", 0), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Tell: func(_ context.Context, o Off) error { told = append(told, o); return nil }}
	ctx := context.Background()
	toldIDs := func() string {
		var ids []string
		for _, o := range told {
			ids = append(ids, o.WorkflowID+"@"+o.Episode)
		}
		told = nil
		return strings.Join(ids, ",")
	}

	// First read: the one n8n ran before is told of; three pages.
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := toldIDs(); got != "G-crashed@t0" {
		t.Fatalf("first read told %q, want G-crashed@t0", got)
	}
	if list, execs := n.listCalls(); list != 3 || execs != 2 {
		t.Fatalf("first read: %d list pages, %d execution reads; want 3 and 2 (the off guarded workflows)", list, execs)
	}

	// Nothing changed: nothing told, the list only.
	if err := w.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := toldIDs(); got != "" {
		t.Fatalf("a read without change told %q", got)
	}
	if list, execs := n.listCalls(); list != 3 || execs != 0 {
		t.Fatalf("later read: %d list pages, %d execution reads; want 3 and 0", list, execs)
	}

	// The key is revoked: one log line for any number of reads, no tell.
	n.revoked = true
	for range 3 {
		if err := w.Poll(ctx); err == nil {
			t.Fatal("a 401 was taken for a list")
		}
	}
	if c := strings.Count(logs.String(), "are not watched while"); c != 1 || !strings.Contains(logs.String(), "HTTP 401") {
		t.Fatalf("logged the refusal %d times, want once naming HTTP 401:\n%s", c, logs.String())
	}
	n.revoked = false

	// n8n turns the running one off (while the key was revoked): told once.
	n.set("G-running", false, "t1")
	n.set("U-plain", false, "t1")
	for range 2 {
		if err := w.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := toldIDs(); got != "G-running@t1" {
		t.Fatalf("after n8n turned G-running off: told %q, want G-running@t1 once", got)
	}
	if !strings.Contains(logs.String(), "is read again") {
		t.Fatalf("the watch's return is not said:\n%s", logs.String())
	}

	// Published again, then off again: a new time off, told again.
	n.set("G-running", true, "t2")
	_ = w.Poll(ctx)
	n.set("G-running", false, "t3")
	_ = w.Poll(ctx)
	if got := toldIDs(); got != "G-running@t3" {
		t.Fatalf("the second time off: told %q, want G-running@t3", got)
	}

	// A tell that fails is tried again at the next read.
	n.set("G-running", true, "t4")
	_ = w.Poll(ctx)
	n.set("G-running", false, "t5")
	fail := true
	w.Tell = func(_ context.Context, o Off) error {
		if fail {
			fail = false
			return fmt.Errorf("outbox down")
		}
		told = append(told, o)
		return nil
	}
	if err := w.Poll(ctx); err == nil {
		t.Fatal("a failed tell was not reported")
	}
	_ = w.Poll(ctx)
	if got := toldIDs(); got != "G-running@t5" {
		t.Fatalf("after a failed tell: told %q, want G-running@t5 at the next read", got)
	}
}
