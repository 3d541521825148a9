//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// TestCheckBeforePaging: the lead example with its shipped check
// (workflows/lead-check.json) in real n8n. The guard asks the check about
// every key that goes unknown before it pages anyone:
//
//   - the CRM wrote the contact but its answer timed out: the check finds
//     the contact, the key is completed with the CRM's id, nobody is paged,
//     a later copy is a duplicate_event with that id, one CRM create;
//   - the CRM never got the request (lost on the way, the client timed
//     out): the check finds nothing, the key fails retryable, the resend
//     writes the contact once;
//   - the check's own search fails: the check workflow fails, and the
//     owner is paged as without a check.
func TestCheckBeforePaging(t *testing.T) {
	// The guard needs the check's URL at start, n8n's port is chosen
	// later: a forwarder in between is pointed at n8n once it runs.
	fwd := startForwarder(t)
	cfg := strings.Replace(guardConfig, "    owner: U0CRMOWNER\n    runbook:", "    owner: U0CRMOWNER\n    check: lead-check\n    runbook:", 1) +
		fmt.Sprintf("checks:\n  lead-check:\n    url: %s/webhook/%s\n    timeout: 20s\n    tries: 2\n", fwd.URL(), workflows.LeadCheckPath)
	if !strings.Contains(cfg, "check: lead-check") {
		t.Fatal("the guard config names no check")
	}
	s := newSuite(t, cfg)
	files, err := s.shippedFiles(s.guard.URL())
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string][]byte{}
	for n, b := range files {
		if strings.Contains(n, "lead-to-crm") || strings.Contains(n, "lead-check") {
			mine[n] = b
		}
	}
	if len(mine) != 2 {
		t.Fatalf("shipped lead files: %d, want the lead workflow and its check", len(mine))
	}
	s.startN8N(t, nil, mine, []string{"n8nGuardLeadCrm1", workflows.LeadCheckID}, []string{leadPath, workflows.LeadCheckPath}, false)
	fwd.Point(s.n8n.URL())

	t.Run("the CRM wrote, its answer timed out: found, completed with the CRM's id, nobody paged", func(t *testing.T) {
		key := "evt-chk-found"
		s.crm.Plan(key, answerHang)
		expect(t, s.send(t, leadPath, lead(key, "found@example.org")), 202, "state_unknown")
		rec := s.waitState(t, key, "completed", 60*time.Second)
		ids := s.crm.IDs(key)
		if len(ids) != 1 || rec.ResultRef != ids[0] {
			t.Fatalf("record %+v, CRM ids %v: want completed with the one contact's id", rec, ids)
		}
		h := s.lastHistory(t, key)
		if h.Event != "checked" || h.By != "check:lead-check" || !strings.Contains(h.Detail, "found "+ids[0]) || !strings.Contains(h.Detail, "workflow n8n-guard: lead check, execution ") {
			t.Fatalf("history %+v: want the check's decision with its workflow and execution", h)
		}
		r := s.send(t, leadPath, lead(key, "found@example.org"))
		if r.Status != 200 || r.Code != "duplicate_event" || r.Ref != ids[0] {
			t.Fatalf("a later copy got %s, want 200 duplicate_event with %s", r, ids[0])
		}
		if w, req := s.crm.Writes(key), s.crm.Requests(key); w != 1 || req != 1 {
			t.Fatalf("CRM writes %d in %d requests, want exactly one create", w, req)
		}
	})
	t.Run("the CRM never got it: absent, failed retryable, the resend writes once", func(t *testing.T) {
		key := "evt-chk-absent"
		s.crm.Plan(key, answerLost)
		expect(t, s.send(t, leadPath, lead(key, "absent@example.org")), 202, "state_unknown")
		rec := s.waitState(t, key, "failed", 60*time.Second)
		if !rec.Retryable || s.crm.Writes(key) != 0 {
			t.Fatalf("record %+v, CRM writes %d: want failed, retryable, nothing written", rec, s.crm.Writes(key))
		}
		if h := s.lastHistory(t, key); h.Event != "checked" || !strings.HasPrefix(h.Detail, "absent") {
			t.Fatalf("history %+v", h)
		}
		r := s.send(t, leadPath, lead(key, "absent@example.org"))
		if r.Status != 200 || r.Code != "accepted" {
			t.Fatalf("the resend got %s, want 200 accepted", r)
		}
		if w := s.crm.Writes(key); w != 1 {
			t.Fatalf("CRM writes = %d, want the event written once", w)
		}
		if rec := s.lookup(t, "crm-contacts", key); rec.State != "completed" || rec.Attempt != 2 {
			t.Fatalf("after the resend: %+v", rec)
		}
	})
	t.Run("nobody was paged about the keys the check decided", func(t *testing.T) {
		time.Sleep(3 * time.Second) // past the group window: a page would be out by now
		for _, m := range s.slack.Messages() {
			if strings.Contains(m.Content(), "evt-chk-found") || strings.Contains(m.Content(), "evt-chk-absent") || strings.Contains(m.Content(), "went unknown") {
				t.Fatalf("a person was paged: %s %s", m.Method, tail(m.Content(), 400))
			}
		}
	})
	t.Run("the check fails: the owner is paged as before", func(t *testing.T) {
		key := "evt-chk-broken"
		s.crm.Plan(key, answerHang)
		s.crm.FailSearch(key)
		expect(t, s.send(t, leadPath, lead(key, "broken@example.org")), 202, "state_unknown")
		s.waitSlack(t, 90*time.Second, key, "U0CRMOWNER")
		if n := s.crm.Searches(key); n != 2 {
			t.Errorf("the check searched %d times, want 2 (tries: 2)", n)
		}
		if rec := s.lookup(t, "crm-contacts", key); rec.State != "unknown" {
			t.Fatalf("record %+v, want unknown for the person", rec)
		}
		if h := s.lastHistory(t, key); h.Event != "check_failed" {
			t.Fatalf("history %+v, want check_failed", h)
		}
	})
}

// waitState polls the key until it is in state.
func (s *suite) waitState(t *testing.T, key, state string, timeout time.Duration) record {
	t.Helper()
	var rec record
	if testwait.PollEvery(timeout, testwait.Outside, func() bool {
		rec = s.lookup(t, "crm-contacts", key)
		return rec.State == state
	}) {
		return rec
	}
	t.Fatalf("%s is %+v after %s, want %s (guard log: %s)", key, rec, timeout, state, s.guard.logPath)
	return rec
}

type historyEntry struct {
	Event  string `json:"event"`
	By     string `json:"by"`
	Detail string `json:"detail"`
}

func (s *suite) lastHistory(t *testing.T, key string) historyEntry {
	t.Helper()
	raw, err := s.guard.api.Lookup(context.Background(), "crm-contacts", key)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		History []historyEntry `json:"history"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil || len(rec.History) == 0 {
		t.Fatalf("record of %s: %v %s", key, err, raw)
	}
	return rec.History[len(rec.History)-1]
}

// search answers the CRM's contact search by event id (the
// Idempotency-Key the contact was written with), as a CRM's search API
// does: {"results": [{"id": ...}]}, empty when there is none; 500 for a
// key whose search is told to fail.
func (t *target) search(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("event_id")
	t.mu.Lock()
	t.searchCounts[key]++
	fails := t.searchFails[key]
	ids := append([]string(nil), t.ids[key]...)
	t.mu.Unlock()
	if fails {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": "search index unavailable"})
		return
	}
	results := []map[string]any{}
	for _, id := range ids {
		results = append(results, map[string]any{"id": id, "event_id": key})
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results})
}

// IDs are the ids of the records written for key.
func (t *target) IDs(key string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.ids[key]...)
}

// FailSearch makes every search for key fail.
func (t *target) FailSearch(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.searchFails[key] = true
}

// Searches is how often key was searched.
func (t *target) Searches(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.searchCounts[key]
}

// forwarder passes requests on to an address set after it started.
type forwarder struct {
	addr     string
	upstream atomic.Pointer[url.URL]
}

func startForwarder(t *testing.T) *forwarder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{addr: ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := f.upstream.Load()
		if u == nil {
			http.Error(w, "n8n is not started yet", http.StatusServiceUnavailable)
			return
		}
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f
}

func (f *forwarder) URL() string { return "http://" + f.addr }

func (f *forwarder) Point(to string) {
	u, _ := url.Parse(to)
	f.upstream.Store(u)
}
