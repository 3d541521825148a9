package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Where parking, approvals and checks meet: sequences of several
// transitions that each feature's own table does not reach.

// A person's resolution may not stand in for an approval: resolved
// "failed" (retryable), the next copy of an event nobody approved would
// write.
func TestResolveDoesNotDecideAnApproval(t *testing.T) {
	for _, state := range []string{"awaiting approval", "rejected", "rejected, resumed"} {
		t.Run(state, func(t *testing.T) {
			f := approvalFixtures[state](t)
			for _, res := range []keystore.State{keystore.StateFailed, keystore.StateCompleted} {
				_, err := keystore.DecideResolve(f.cur, keystore.ResolveRequest{Namespace: "invoices", Key: "inv_1",
					Resolution: res, By: "ann", Note: "let it through"}, gated, now)
				if errs.CodeOf(err) != errs.Conflict {
					t.Fatalf("resolve %s of a key %s: %v, want a conflict (approve or reject it)", res, state, err)
				}
			}
		})
	}
	// Approved is decided: a person may still settle it (entered by hand).
	f := approvalFixtures["approved"](t)
	if _, err := keystore.DecideResolve(f.cur, keystore.ResolveRequest{Namespace: "invoices", Key: "inv_1",
		Resolution: keystore.StateCompleted, By: "bob", Note: "entered by hand"}, gated, now); err != nil {
		t.Fatalf("resolve an approved key: %v", err)
	}
}

// n8n's "accepted" for a resume call that arrives after the woken
// execution already parked the key again (a window began, the breaker
// opened) must not mark the new parking as resumed: nobody would ever
// call its new resume URL.
func TestStaleResumeAnswerDoesNotStrandAReparkedKey(t *testing.T) {
	f := parked(t)
	parkedAt := *f.cur.ParkedAt
	claim, ok := keystore.DecideClaimResume(f.cur, keystore.NewBreaker("crm"), time.Minute, toUnk, now)
	if !ok {
		t.Fatal("claim refused")
	}
	// The woken execution reserves while the destination is paused again.
	again := must(t)(keystore.DecideReserve(claim.Record, pausedCRM(), keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1",
		Owner: "n8n exec 9", Destination: "crm", ResumeURL: "http://n8n:5678/webhook-waiting/9"}, fpA, toUnk, now.Add(time.Second)))
	if again.Record.State != keystore.StateParked || !again.Record.ParkedAt.Equal(parkedAt) {
		t.Fatalf("woken execution during a pause: %s parked at %v, want parked at %v", again.Record.State, again.Record.ParkedAt, parkedAt)
	}
	// Now the first call's answer is recorded.
	if s, ok := keystore.DecideResumeAnswered(again.Record, nil, parkedAt, keystore.ResumeAccepted, "", now.Add(2*time.Second)); ok {
		t.Fatalf("a stale accepted answer was recorded: resume_sent_at %v", s.Record.ResumeSentAt)
	}
	// And the new resume URL is claimed once the destination is back.
	if _, ok := keystore.DecideClaimResume(again.Record, keystore.NewBreaker("crm"), time.Minute, toUnk, now.Add(time.Hour)); !ok {
		t.Fatal("the parked key cannot be claimed after the pause: stranded")
	}
}

// A lease that ran out makes the key unknown (held for its check) before
// the holder's own fail arrives with where its execution waits; the check's
// "absent" must then park the key for that execution, not strand it.
func TestLateFailKeepsTheResumeURLForTheCheck(t *testing.T) {
	f := heldFor(t, "")
	s := must(t)(keystore.DecideFail(f.cur, nil, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_1", Token: f.token,
		Reason: keystore.ReasonOutcomeUnknown, Message: "timeout", ResumeURL: resumeURL}, withCheck, keystore.DestinationPolicy{}, now))
	if !s.Result.Replayed || s.Record == nil || s.Record.Check == nil || s.Record.Check.ResumeURL != resumeURL {
		t.Fatalf("late fail: %+v, want a replay that keeps the resume URL on the hold", s)
	}
	a, ok := keystore.DecideCheckAnswered(s.Record, 1, keystore.CheckAnswer{Result: keystore.CheckAbsent}, withCheck, now)
	if !ok || a.Record.State != keystore.StateParked || a.Record.ResumeURL != resumeURL {
		t.Fatalf("absent after the late fail: %+v, want parked for %s", a.Record, resumeURL)
	}
}
