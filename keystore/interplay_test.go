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
	// Approved is decided: a person may still settle it (entered by
	// hand), but while its execution waits for the resume call only with
	// force, which the history records (the one rule, resolve_parked.go).
	f := approvalFixtures["approved"](t)
	req := keystore.ResolveRequest{Namespace: "invoices", Key: "inv_1", Resolution: keystore.StateCompleted, By: "bob", Note: "entered by hand"}
	if _, err := keystore.DecideResolve(f.cur, req, gated, now); errs.CodeOf(err) != errs.ParkedWaiting {
		t.Fatalf("resolve an approved key not yet resumed: %v, want parked_waiting", err)
	}
	req.Force = true
	if _, err := keystore.DecideResolve(f.cur, req, gated, now); err != nil {
		t.Fatalf("resolve an approved key with force: %v", err)
	}
}

// n8n's answer to a resume call that arrives after the woken execution
// already parked the key again (a window began, the breaker opened) is
// about the earlier parking: "accepted" must not mark the new parking as
// resumed (nobody would ever call its new resume URL), a 404/409 must not
// mark the execution waiting on it lost. The new parking has its own
// parked_at, which the late answer does not name.
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
	if again.Record.State != keystore.StateParked || !again.Record.ParkedAt.Equal(now.Add(time.Second)) {
		t.Fatalf("woken execution during a pause: %s parked at %v, want a new parking at %v", again.Record.State, again.Record.ParkedAt, now.Add(time.Second))
	}
	// Now the first call's answer is recorded.
	if s, ok := keystore.DecideResumeAnswered(again.Record, nil, parkedAt, keystore.ResumeAccepted, "", now.Add(2*time.Second)); ok {
		t.Fatalf("a stale accepted answer was recorded: resume_sent_at %v", s.Record.ResumeSentAt)
	}
	if s, ok := keystore.DecideResumeAnswered(again.Record, nil, parkedAt, keystore.ResumeLost, "409 finished", now.Add(2*time.Second)); ok {
		t.Fatalf("a stale lost answer marked the waiting execution lost: %s %s", s.Record.Reason, s.Record.Message)
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

// A key parked again — its woken or claimed execution reserved while the
// destination was paused again, or its source re-sent a lost event — is a
// new parking with its own parked_at: parked_limit counts from it (a
// re-sent lost event is not overdue at once) and late answers about the
// parking that ended name another parked_at (TestStaleResumeAnswerDoesNotStrandAReparkedKey).
func TestEveryNewParkingHasItsOwnParkedAt(t *testing.T) {
	for _, from := range []string{"parked, claimed", "parked, probe", "parked, resumed", "parked, lost"} {
		f := fixtures[from](t)
		s, err := reserveParking(f)
		if err != nil || s.Record == nil || s.Record.State != keystore.StateParked {
			t.Fatalf("%s: re-park %+v %v", from, s.Result, err)
		}
		if !s.Record.ParkedAt.Equal(now) || s.Record.ParkedAt.Equal(*f.cur.ParkedAt) {
			t.Errorf("%s: parked again at %v, want a new parking at %v (was %v)", from, s.Record.ParkedAt, now, f.cur.ParkedAt)
		}
	}
}
