//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

const (
	approvalPath       = "n8n-guard-e2e/approval"
	approvalWorkflowID = "n8nGuardE2eApprove1"
)

const approvalConfig = `namespaces:
  invoices:
    lease: 120s
    owner: U0FINOWNER
    channel: C0FIN
    approval: required
    approvers: [U0CTRL, U0ANN]
    four_eyes: true
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
  group_window: 1s
`

// TestApprovalBeforeWriting: a namespace that requires approval, in real
// n8n. Three invoices: each execution reserves, is parked awaiting
// approval and waits in its Wait node ("On Webhook Call", Header Auth
// X-N8n-Guard-Resume); the approvers get one Slack message each. The
// requester may not approve (four eyes). Two are approved and one is
// rejected with a reason: the guard resumes all three; the approved ones
// reserve again (accepted) and write once each, the rejected one's reserve
// answers rejected and the execution ends reporting the rejection, without
// a CRM write. A late Approve changes nothing.
func TestApprovalBeforeWriting(t *testing.T) {
	s := newSuite(t, approvalConfig)
	outcomes, err := startTarget("outcomes", "id", "outcome", http.StatusOK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(outcomes.Close)
	b, err := os.ReadFile(filepath.Join(s.repo, "e2e", "testdata", "approval", "workflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	wf := strings.NewReplacer("__GUARD_URL__", s.guard.URL(), "__CRM_URL__", s.crm.URL(), "__OUTCOME_URL__", outcomes.URL()).Replace(string(b))
	// The workflow's Wait node checks the resume credential that the suite
	// imports with the guard's secret, as n8n setup would create it.
	s.startN8N(t, nil, map[string][]byte{"approval.json": []byte(wf)}, []string{approvalWorkflowID}, []string{approvalPath}, false)

	keys := []string{"inv-1", "inv-2", "inv-3"}
	for _, key := range keys {
		r := s.send(t, approvalPath, map[string]any{"event_id": key, "requested_by": "U0ANN", "amount": 1200})
		if r.Status != http.StatusOK {
			t.Fatalf("webhook %s: %s", key, r)
		}
	}
	for _, key := range keys {
		s.waitRecord(t, key, 60*time.Second, func(r record) bool { return r.State == "parked" && r.Reason == "awaiting_approval" })
		s.waitSlack(t, 30*time.Second, "C0FIN", "waits for your approval", key, "guard_approve", "guard_reject")
	}
	posts := 0
	for _, m := range s.slack.Messages() {
		if m.Method == "chat.postMessage" && strings.Contains(m.Content(), "waits for your approval") {
			posts++
		}
	}
	if posts != 3 {
		t.Fatalf("%d approval messages at Slack, want 3", posts)
	}
	// Nothing was written while they wait, and nothing is resumed.
	time.Sleep(2 * time.Second)
	if n := s.crm.TotalWrites(); n != 0 {
		t.Fatalf("CRM writes before any approval: %d", n)
	}

	if st, body := s.decide(t, "approve", "inv-1", "U0ANN", ""); st != http.StatusForbidden {
		t.Fatalf("the requester approved (four eyes): HTTP %d %s", st, body)
	}
	for _, key := range []string{"inv-1", "inv-2"} {
		if st, body := s.decide(t, "approve", key, "controller", "amount checked"); st != http.StatusOK || !strings.Contains(body, `"outcome":"approved"`) {
			t.Fatalf("approve %s: HTTP %d %s", key, st, body)
		}
	}
	if st, body := s.decide(t, "reject", "inv-3", "controller", "duplicate of INV-1041"); st != http.StatusOK || !strings.Contains(body, `"outcome":"rejected"`) {
		t.Fatalf("reject inv-3: HTTP %d %s", st, body)
	}

	for _, key := range []string{"inv-1", "inv-2"} {
		rec := s.waitRecord(t, key, 90*time.Second, func(r record) bool { return r.State == "completed" })
		if rec.Attempt != 1 || rec.ResultRef == "" {
			t.Fatalf("%s: %+v, want completed by attempt 1 with the CRM id", key, rec)
		}
	}
	rej := s.waitRecord(t, "inv-3", 90*time.Second, func(r record) bool { return r.State == "failed" })
	if rej.Reason != "approval_rejected" || rej.Retryable || rej.Message != "duplicate of INV-1041" {
		t.Fatalf("inv-3: %+v, want failed for good with the reason", rej)
	}
	testwait.WithinEvery(t, 60*time.Second, testwait.Outside, "the rejected execution reports its end", func() bool { return outcomes.Writes("inv-3") == 1 })
	if body := outcomes.LastBody("inv-3"); body["outcome"] != "rejected" || body["message"] != "duplicate of INV-1041" {
		t.Fatalf("the rejected execution ended with %v", body)
	}

	// A late Approve: the same answer, replayed; nothing is resumed or written again.
	if st, body := s.decide(t, "approve", "inv-1", "U0CTRL", ""); st != http.StatusOK || !strings.Contains(body, `"outcome":"approved"`) {
		t.Fatalf("late approve: HTTP %d %s", st, body)
	}
	if st, _ := s.decide(t, "approve", "inv-3", "U0CTRL", ""); st != http.StatusConflict {
		t.Fatalf("approving a rejected invoice: HTTP %d, want 409", st)
	}
	time.Sleep(3 * time.Second)
	if s.crm.Writes("inv-1") != 1 || s.crm.Writes("inv-2") != 1 || s.crm.Writes("inv-3") != 0 || s.crm.TotalWrites() != 2 {
		t.Fatalf("CRM writes inv-1 %d, inv-2 %d, inv-3 %d (total %d); want exactly 2: the approved ones once each",
			s.crm.Writes("inv-1"), s.crm.Writes("inv-2"), s.crm.Writes("inv-3"), s.crm.TotalWrites())
	}
	if outcomes.Writes("inv-1") != 0 || outcomes.Writes("inv-2") != 0 {
		t.Fatalf("an approved execution reported not writing")
	}
	s.waitSlack(t, 30*time.Second, "controller", "*approved* it", "inv-1")
	s.waitSlack(t, 30*time.Second, "controller", "*rejected* it", "inv-3")
}

// decide approves or rejects a key through the guard's API.
func (s *suite) decide(t *testing.T, verb, key, by, note string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"namespace": "invoices", "key": key, "by": by, "note": note})
	req, _ := http.NewRequest(http.MethodPost, s.guard.URL()+"/v1/"+verb, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+guardToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/%s: %v", verb, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// waitRecord waits until the key's record satisfies ok.
func (s *suite) waitRecord(t *testing.T, key string, timeout time.Duration, ok func(record) bool) record {
	t.Helper()
	var last record
	if testwait.PollEvery(timeout, testwait.Outside, func() bool {
		rec, err := s.guard.Lookup("invoices", key)
		last = rec
		return err == nil && ok(rec)
	}) {
		return last
	}
	t.Fatalf("%s: the record stayed %+v for %s (guard log: %s)", key, last, timeout, filepath.Join(s.work, "guard.log"))
	return last
}
