//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
)

const (
	leadPath    = "n8n-guard/lead"
	bookingPath = "n8n-guard/booking"
	dedupePath  = "n8n-guard-e2e/dedupe"
	throwPath   = "n8n-guard-e2e/throw"
)

// TestWorkflows imports the shipped workflows unchanged into a real n8n and
// proves, through real webhooks, that every event reaches its target
// exactly as often as it should.
func TestWorkflows(t *testing.T) {
	s := setup(t)
	cases := []struct {
		name string
		run  func(*testing.T)
	}{
		{"1 first event writes once", s.caseFirstEvent},
		{"2 sequential repeat writes nothing more", s.caseSequentialRepeat},
		{"3 twenty simultaneous copies write once", s.caseSimultaneousCopies},
		{"4 missing event id writes nothing", s.caseMissingKey},
		{"5 same lead with two event ids writes twice", s.caseTwoEventIDs},
		{"6 CRM 500 after reservation, then resend", s.caseCRMFailure},
		{"6b CRM 429 and 400 are classified", s.caseCRMClassified},
		{"7 CRM timeout is unknown and never resent", s.caseCRMTimeout},
		{"8 a workflow that throws reaches its owner in Slack", s.caseThrowingWorkflow},
		{"8b the error workflow survives a short guard outage", s.caseErrorWorkflowRetries},
		{"guard down: the lead is answered guard_unavailable and the failure is reported", s.caseGuardDown},
		{"booking: one confirmation mail per booking", s.caseBookingOnce},
		{"booking: mail timeout alerts the owner, no second mail", s.caseBookingTimeout},
		{"breaker: CRM refused pauses the destination", s.caseCRMRefused},
		{"templates: the five HTTP nodes pasted into a workflow", s.caseTemplates},
		{"Remove Duplicates node under twenty copies (figure)", s.caseRemoveDuplicatesFigure},
		{"community node", s.caseCommunityNode},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

// 1. The first event is written once; the sender gets the CRM's record id.
func (s *suite) caseFirstEvent(t *testing.T) {
	key := "evt-1001"
	r := s.send(t, leadPath, lead(key, "ada@example.org"))
	expect(t, r, 200, "accepted")
	if got := s.crm.Writes(key); got != 1 {
		t.Fatalf("CRM writes = %d, want 1", got)
	}
	if r.Ref == "" || r.Key != key {
		t.Fatalf("answer lacks the key or the CRM record id: %s", r)
	}
	if body := s.crm.LastBody(key); body["email"] != "ada@example.org" {
		t.Fatalf("CRM got %v, want the normalised lead", body)
	}
	rec := s.lookup(t, "crm-contacts", key)
	if rec.State != "completed" || rec.ResultRef != r.Ref {
		t.Fatalf("guard record %+v, want completed with result_ref %q", rec, r.Ref)
	}
}

// 2. Sending the same event again writes nothing and answers the first
// write's reference.
func (s *suite) caseSequentialRepeat(t *testing.T) {
	key := "evt-1002"
	first := s.send(t, leadPath, lead(key, "ada@example.org"))
	expect(t, first, 200, "accepted")
	for i := 0; i < 3; i++ {
		again := s.send(t, leadPath, lead(key, "ADA@example.org ")) // normalises to the same lead
		expect(t, again, 200, "duplicate_event")
		if again.Ref != first.Ref {
			t.Fatalf("repeat answered result_ref %q, first write %q", again.Ref, first.Ref)
		}
	}
	if got := s.crm.Writes(key); got != 1 {
		t.Fatalf("CRM writes = %d, want 1", got)
	}
}

// burst sends n copies of one event at the same instant.
func (s *suite) burst(t *testing.T, path string, body map[string]any, n int) []reply {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	replies := make([]reply, n)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = s.send(t, path, body)
		}()
	}
	close(start)
	wg.Wait()
	return replies
}

// 3. Twenty simultaneous copies of one event, five rounds: one write each.
func (s *suite) caseSimultaneousCopies(t *testing.T) {
	for round := 1; round <= 5; round++ {
		key := fmt.Sprintf("evt-burst-%d", round)
		replies := s.burst(t, leadPath, lead(key, "burst@example.org"), 20)
		codes := map[string]int{}
		var ref string
		for _, r := range replies {
			codes[r.Code]++
			switch {
			case r.Status == 200 && r.Code == "accepted":
				ref = r.Ref
			case r.Status == 200 && r.Code == "duplicate_event":
			case r.Status == 409 && r.Code == "in_progress":
				if r.Header.Get("Retry-After") == "" {
					t.Errorf("round %d: in_progress without Retry-After", round)
				}
			default:
				t.Errorf("round %d: unexpected answer %s", round, r)
			}
		}
		if got := s.crm.Writes(key); got != 1 {
			t.Errorf("round %d: CRM writes = %d, want 1 (answers %v)", round, got, codes)
		}
		if codes["accepted"] != 1 {
			t.Errorf("round %d: %d copies accepted, want 1 (answers %v)", round, codes["accepted"], codes)
		}
		for _, r := range replies {
			if r.Code == "duplicate_event" && r.Ref != ref {
				t.Errorf("round %d: duplicate answered result_ref %q, the write %q", round, r.Ref, ref)
			}
		}
		t.Logf("round %d: 20 copies → %d CRM write(s); answers %v", round, s.crm.Writes(key), codes)
	}
}

// 4. No event id: nothing is written and the key is never invented. A key
// carrying personal data (an e-mail address) is refused the same way.
func (s *suite) caseMissingKey(t *testing.T) {
	before := s.crm.TotalWrites()
	r := s.send(t, leadPath, lead("", "nokey@example.org"))
	expect(t, r, 400, "invalid_key")
	r = s.send(t, leadPath, lead("   ", "nokey@example.org"))
	expect(t, r, 400, "invalid_key")
	r = s.send(t, leadPath, lead("nokey@example.org", "nokey@example.org"))
	expect(t, r, 400, "invalid_key")
	if got := s.crm.TotalWrites(); got != before {
		t.Fatalf("CRM writes went from %d to %d, want no write", before, got)
	}
}

// 5. The same lead sent as two events is two writes: the key is the event,
// not the content.
func (s *suite) caseTwoEventIDs(t *testing.T) {
	a := s.send(t, leadPath, lead("evt-2001", "twice@example.org"))
	b := s.send(t, leadPath, lead("evt-2002", "twice@example.org"))
	expect(t, a, 200, "accepted")
	expect(t, b, 200, "accepted")
	if a.Ref == b.Ref {
		t.Fatalf("two events answered the same result_ref %q", a.Ref)
	}
	if s.crm.Writes("evt-2001") != 1 || s.crm.Writes("evt-2002") != 1 {
		t.Fatalf("CRM writes %d and %d, want 1 and 1", s.crm.Writes("evt-2001"), s.crm.Writes("evt-2002"))
	}
}

// 6. The CRM fails with 500 after the reservation: the key is failed and
// retryable, the resend writes, and there is exactly one write in total.
func (s *suite) caseCRMFailure(t *testing.T) {
	key := "evt-3001"
	s.crm.Plan(key, answer500)
	r := s.send(t, leadPath, lead(key, "flaky@example.org"))
	expect(t, r, 502, "destination_failed")
	rec := s.lookup(t, "crm-contacts", key)
	if rec.State != "failed" || !rec.Retryable || rec.Reason != "destination_failed" {
		t.Fatalf("after CRM 500 the record is %+v, want failed, retryable, destination_failed", rec)
	}
	if s.crm.Writes(key) != 0 {
		t.Fatalf("CRM writes = %d after a 500, want 0", s.crm.Writes(key))
	}
	r = s.send(t, leadPath, lead(key, "flaky@example.org"))
	expect(t, r, 200, "accepted")
	if got, req := s.crm.Writes(key), s.crm.Requests(key); got != 1 || req != 2 {
		t.Fatalf("CRM writes %d in %d requests, want 1 in 2", got, req)
	}
	rec = s.lookup(t, "crm-contacts", key)
	if rec.State != "completed" || rec.ResultRef != r.Ref {
		t.Fatalf("record %+v, want completed with %q", rec, r.Ref)
	}
	// And once more: done is done.
	expect(t, s.send(t, leadPath, lead(key, "flaky@example.org")), 200, "duplicate_event")
	if got := s.crm.Writes(key); got != 1 {
		t.Fatalf("CRM writes = %d, want 1", got)
	}
}

// The other answers of a CRM: 429 is a transient failure (the CRM's
// Retry-After is passed on, the resend writes); 400 is the data's fault
// (validation_failed, and later copies are rejected without a request).
func (s *suite) caseCRMClassified(t *testing.T) {
	limited, refused := "evt-3101", "evt-3102"
	s.crm.Plan(limited, answer429)
	r := s.send(t, leadPath, lead(limited, "busy@example.org"))
	expect(t, r, 502, "destination_failed")
	if r.Header.Get("Retry-After") != "30" {
		t.Fatalf("Retry-After %q, want the CRM's 30", r.Header.Get("Retry-After"))
	}
	expect(t, s.send(t, leadPath, lead(limited, "busy@example.org")), 200, "accepted")
	if got := s.crm.Writes(limited); got != 1 {
		t.Fatalf("CRM writes = %d after 429 and resend, want 1", got)
	}

	s.crm.Plan(refused, answer400)
	expect(t, s.send(t, leadPath, lead(refused, "bad@example.org")), 422, "validation_failed")
	if rec := s.lookup(t, "crm-contacts", refused); rec.State != "failed" || rec.Retryable || rec.Reason != "validation_failed" {
		t.Fatalf("record %+v, want failed, not retryable, validation_failed", rec)
	}
	expect(t, s.send(t, leadPath, lead(refused, "bad@example.org")), 422, "rejected")
	if got, req := s.crm.Writes(refused), s.crm.Requests(refused); got != 0 || req != 1 {
		t.Fatalf("CRM writes %d in %d requests, want 0 in 1", got, req)
	}
}

// 7. The CRM takes the write but does not answer in time: the key is
// unknown, a resend writes nothing, and the namespace's owner hears of it.
func (s *suite) caseCRMTimeout(t *testing.T) {
	key := "evt-4001"
	s.crm.Plan(key, answerHang)
	r := s.send(t, leadPath, lead(key, "slow@example.org"))
	expect(t, r, 202, "state_unknown")
	rec := s.lookup(t, "crm-contacts", key)
	if rec.State != "unknown" {
		t.Fatalf("after a timeout the record is %+v, want unknown", rec)
	}
	r = s.send(t, leadPath, lead(key, "slow@example.org"))
	expect(t, r, 202, "state_unknown")
	if got, req := s.crm.Writes(key), s.crm.Requests(key); got != 1 || req != 1 {
		t.Fatalf("CRM writes %d in %d requests, want the one write that timed out and no resend", got, req)
	}
	s.waitSlack(t, 60*time.Second, key, "U0CRMOWNER")
}

// 8. A workflow that throws runs the shipped error workflow, which hands the
// failure to the guard, which tells the workflow's owner in Slack.
func (s *suite) caseThrowingWorkflow(t *testing.T) {
	r := s.send(t, throwPath, map[string]any{"field": "company"})
	if r.Status != http.StatusOK {
		t.Fatalf("throw webhook answered %s", r)
	}
	m := s.waitSlack(t, 90*time.Second, "e2e-throws", "U0E2EOWNER")
	if m.Channel != "C0E2E" {
		t.Fatalf("message went to %q, want the owner's channel C0E2E", m.Channel)
	}
	items, err := s.guard.Notifications()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range items {
		if n.WorkflowID == "n8nGuardE2eThrow" && n.Owner == "U0E2EOWNER" {
			return
		}
	}
	t.Fatalf("no notification for workflow n8nGuardE2eThrow owned by U0E2EOWNER in %+v", items)
}

// The error workflow's Retry On Fail carries a failure over a short guard
// outage: the guard is down when the workflow throws and back seconds later.
func (s *suite) caseErrorWorkflowRetries(t *testing.T) {
	seen := func() int {
		n := 0
		for _, m := range s.slack.Messages() {
			if strings.Contains(m.Content(), "e2e-throws") {
				n++
			}
		}
		return n
	}
	before := seen()
	s.guard.Stop()
	r := s.send(t, throwPath, map[string]any{"field": "during-outage"})
	if r.Status != http.StatusOK {
		t.Fatalf("throw webhook answered %s", r)
	}
	time.Sleep(7 * time.Second) // the error workflow retries 5 times, 5 s apart
	if err := s.guard.start(); err != nil {
		t.Fatal(err)
	}
	if !testwait.Poll(60*time.Second, func() bool { return seen() != before }) {
		t.Fatalf("no new Slack message for e2e-throws within 60s after the guard came back")
	}
}

// n8n-guard is down when a lead arrives: nothing is written, the sender is
// told to come back (503 + Retry-After), and the execution fails so that the
// error workflow reports it once the guard is back.
func (s *suite) caseGuardDown(t *testing.T) {
	key := "evt-8001"
	s.guard.Stop()
	r := s.send(t, leadPath, lead(key, "down@example.org"))
	if err := s.guard.start(); err != nil {
		t.Fatal(err)
	}
	expect(t, r, 503, "guard_unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("guard_unavailable without Retry-After: %s", r)
	}
	if got := s.crm.Requests(key); got != 0 {
		t.Fatalf("CRM got %d requests while the guard was down, want 0", got)
	}
	s.waitSlack(t, 60*time.Second, "n8n-guard: lead to CRM", "Stop: n8n-guard unavailable")
	// Once the guard is back, the resend goes through.
	expect(t, s.send(t, leadPath, lead(key, "down@example.org")), 200, "accepted")
	if got := s.crm.Writes(key); got != 1 {
		t.Fatalf("CRM writes = %d, want 1", got)
	}
}

// The booking workflow: one confirmation per booking number, however it
// is spelled and however often it is sent.
func (s *suite) caseBookingOnce(t *testing.T) {
	first := s.send(t, bookingPath, booking("bk-5001"))
	expect(t, first, 200, "accepted")
	if first.Key != "BK-5001" || first.Ref == "" {
		t.Fatalf("answer %s, want key BK-5001 and the mail's message id", first)
	}
	again := s.send(t, bookingPath, booking("BK-5001"))
	expect(t, again, 200, "duplicate_event")
	replies := s.burst(t, bookingPath, booking("BK-5001"), 10)
	for _, r := range replies {
		expect(t, r, 200, "duplicate_event")
	}
	if got := s.mail.Writes("BK-5001"); got != 1 {
		t.Fatalf("mails sent = %d, want 1", got)
	}
	if b := s.mail.LastBody("BK-5001"); b["to"] != "guest@example.org" || !strings.Contains(fmt.Sprint(b["subject"]), "BK-5001") {
		t.Fatalf("mail API got %v", b)
	}
}

// A mail API timeout: the key is unknown, the office is alerted, a resend
// sends nothing; a person resolves it and the next resend is a duplicate.
func (s *suite) caseBookingTimeout(t *testing.T) {
	key := "BK-6001"
	s.mail.Plan(key, answerHang)
	r := s.send(t, bookingPath, booking(key))
	expect(t, r, 202, "state_unknown")
	r = s.send(t, bookingPath, booking(key))
	expect(t, r, 202, "state_unknown")
	if got, req := s.mail.Writes(key), s.mail.Requests(key); got != 1 || req != 1 {
		t.Fatalf("mail API: %d mails in %d requests, want 1 in 1: never an automatic second mail", got, req)
	}
	s.waitSlack(t, 60*time.Second, key, "U0OFFICE")

	rec, err := s.guard.api.Resolve(context.Background(), client.Resolution{
		Namespace: "booking-confirmations", Key: key, Resolution: keystore.StateCompleted,
		By: "office manager", Note: "the provider's log shows the mail went out", ResultRef: "msg-from-log",
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != "completed" {
		t.Fatalf("after resolve the record is %+v", rec)
	}
	r = s.send(t, bookingPath, booking(key))
	expect(t, r, 200, "duplicate_event")
	if r.Ref != "msg-from-log" || s.mail.Requests(key) != 1 {
		t.Fatalf("after resolve: %s and %d mail requests, want the resolved reference and no new mail", r, s.mail.Requests(key))
	}
}

// The CRM refuses connections: the attempt is destination_unreachable, the
// breaker opens, and both leads are answered 202 queued and parked (the
// first by its fail, the second by its reserve); once the CRM is back and
// the cooldown is over the guard resumes both, which are written once each
// without the sender sending again. (Many events, copies, strangers and a
// guard restart: TestParking.)
func (s *suite) caseCRMRefused(t *testing.T) {
	a, b := "evt-7001", "evt-7002"
	s.crm.Refuse()
	r := s.send(t, leadPath, lead(a, "down@example.org"))
	expect(t, r, 202, "queued")
	rec := s.lookup(t, "crm-contacts", a)
	if rec.State != "parked" || rec.Reason != "destination_unreachable" || rec.ResumeURL == "" {
		t.Fatalf("record %+v, want parked after destination_unreachable, with a resume URL", rec)
	}
	r = s.send(t, leadPath, lead(b, "down@example.org"))
	expect(t, r, 202, "queued")
	if r.Header.Get("Retry-After") != "" {
		t.Fatalf("queued with Retry-After %q: the sender must not resend", r.Header.Get("Retry-After"))
	}
	if rec := s.lookup(t, "crm-contacts", b); rec.State != "parked" {
		t.Fatalf("a reserve during the outage recorded %+v, want parked", rec)
	}
	if err := s.crm.Accept(); err != nil {
		t.Fatal(err)
	}
	s.waitCompleted(t, []string{a, b}, 90*time.Second) // the configured cooldown is 3s
	if s.crm.Writes(a) != 1 || s.crm.Writes(b) != 1 {
		t.Fatalf("CRM writes %d and %d, want 1 and 1", s.crm.Writes(a), s.crm.Writes(b))
	}
	expect(t, s.send(t, leadPath, lead(a, "down@example.org")), 200, "duplicate_event")
}

// Case 3 through n8n's own Remove Duplicates node, for comparison. Not a
// gate: the node is known to race; the figure goes into docs/n8n.md.
func (s *suite) caseRemoveDuplicatesFigure(t *testing.T) {
	var writes []int
	total := 0
	for round := 1; round <= 5; round++ {
		key := fmt.Sprintf("dedupe-burst-%d", round)
		s.burst(t, dedupePath, lead(key, "burst@example.org"), 20)
		writes = append(writes, s.crm.Writes(key))
		total += s.crm.Writes(key)
	}
	ours := 0
	for round := 1; round <= 5; round++ {
		ours += s.crm.Writes(fmt.Sprintf("evt-burst-%d", round))
	}
	t.Logf("FIGURE 20 simultaneous copies x 5 events: Remove Duplicates node %d CRM writes (per event %v), n8n-guard %d", total, writes, ours)
}
