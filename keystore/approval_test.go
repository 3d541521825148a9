package keystore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Approval before writing (approval.go), transition by transition: every
// state of a key in a namespace that requires approval against every
// event, refusals included.

var gated = func() keystore.NamespacePolicy {
	np := keystore.Policies{}.Namespace("invoices")
	np.Approval = keystore.ApprovalPolicy{Required: true, FourEyes: true}
	return np
}()

func gatedReserve(resumeURL, requestedBy string) event {
	return gatedReserveOf(fpA, resumeURL, requestedBy)
}

// gatedReserveOf reserves with the fingerprint fp (nil: no payload or fingerprint).
func gatedReserveOf(fp keystore.Fingerprint, resumeURL, requestedBy string) event {
	return func(f fixture) (keystore.Step, error) {
		return keystore.DecideReserve(f.cur, keystore.NewBreaker("crm"), keystore.ReserveRequest{Namespace: "invoices", Key: "inv_1", Owner: "n8n exec 7",
			Destination: "crm", ResumeURL: resumeURL, RequestedBy: requestedBy}, fp, gated, now)
	}
}

// payloadA is the payload fingerprint of an invoice: another kind than fpA.
var payloadA = func() keystore.Fingerprint {
	fp, err := keystore.PayloadFingerprint([]byte(`{"invoice":"inv_1","amount":1200}`))
	if err != nil {
		panic(err)
	}
	return fp
}()

func approveBy(by string) event {
	return func(f fixture) (keystore.Step, error) {
		req, err := keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: by, Note: "ok"}.Normalize(false)
		if err != nil {
			return keystore.Step{}, err
		}
		return keystore.DecideApprove(f.cur, req, gated, now)
	}
}

func rejectBy(by, note string) event {
	return func(f fixture) (keystore.Step, error) {
		req, err := keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: by, Note: note}.Normalize(true)
		if err != nil {
			return keystore.Step{}, err
		}
		return keystore.DecideReject(f.cur, req, gated, now)
	}
}

func gatedClaim(f fixture) (keystore.Step, error) {
	s, _ := keystore.DecideClaimResume(f.cur, keystore.NewBreaker("crm"), time.Minute, gated, now)
	return s, nil
}

func gatedClaimOpen(f fixture) (keystore.Step, error) {
	s, _ := keystore.DecideClaimResume(f.cur, pausedCRM(), time.Minute, gated, now)
	return s, nil
}

// approvalFixtures: a key in each state of the approval life cycle, made
// through the machine itself, at t0.
var approvalFixtures = map[string]func(t *testing.T) fixture{
	"absent":            func(*testing.T) fixture { return fixture{} },
	"awaiting approval": awaiting,
	"approved":          func(t *testing.T) fixture { return approvalStep(t, "approved") },
	"approved, woken":   func(t *testing.T) fixture { return approvalStep(t, "approved, woken") },
	"rejected":          func(t *testing.T) fixture { return approvalStep(t, "rejected") },
	"rejected, resumed": func(t *testing.T) fixture {
		return approvalStep(t, "rejected, resumed")
	},
}

func awaiting(t *testing.T) fixture {
	return fixture{cur: must(t)(keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "invoices", Key: "inv_1", Owner: "n8n exec 7",
		Destination: "crm", ResumeURL: resumeURL, RequestedBy: "ann"}, fpA, gated, t0)).Record}
}

func approvalStep(t *testing.T, to string) fixture {
	t.Helper()
	f := awaiting(t)
	req := keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: "bob", Note: "amount checked"}
	var s keystore.Step
	if to == "approved" || to == "approved, woken" {
		s = must(t)(keystore.DecideApprove(f.cur, req, gated, t0))
	} else {
		s = must(t)(keystore.DecideReject(f.cur, req, gated, t0))
	}
	cur := s.Record
	if to == "approved, woken" || to == "rejected, resumed" {
		c, ok := keystore.DecideClaimResume(cur, nil, time.Minute, gated, t0)
		if !ok {
			t.Fatalf("building the fixture %q: claim refused", to)
		}
		cur = c.Record
	}
	if to == "rejected, resumed" {
		a, ok := keystore.DecideResumeAnswered(cur, nil, *cur.ParkedAt, keystore.ResumeAccepted, "", t0)
		if !ok {
			t.Fatalf("building the fixture %q: answer not recorded", to)
		}
		cur = a.Record
	}
	return fixture{cur: cur}
}

var approvalStates = []string{"absent", "awaiting approval", "approved", "approved, woken", "rejected", "rejected, resumed"}

// approvalWant adds the record's reason to want.
type approvalWant struct {
	want
	reason keystore.Reason
}

func TestApprovalTransitions(t *testing.T) {
	parkedAs := func(r keystore.Reason) approvalWant {
		return approvalWant{want{outcome: keystore.OutcomeParked, state: keystore.StateParked}, r}
	}
	plain := func(w want) approvalWant { return approvalWant{want: w} }
	events := []struct {
		name string
		do   event
		want map[string]approvalWant
	}{
		{"reserve with resume_url (the execution or a copy)", gatedReserve(resumeURL, "carl"), map[string]approvalWant{
			"absent":            parkedAs(keystore.ReasonAwaitingApproval),
			"awaiting approval": plain(answer(keystore.OutcomeParked)),
			"approved":          plain(answer(keystore.OutcomeParked)),
			"approved, woken":   plain(accepted(1)),
			"rejected":          plain(answer(keystore.OutcomeRejected)),
			"rejected, resumed": plain(answer(keystore.OutcomeRejected)),
		}},
		{"reserve without resume_url", gatedReserve("", ""), map[string]approvalWant{
			"absent":            plain(refused(errs.ApprovalRequired)),
			"awaiting approval": plain(answer(keystore.OutcomeParked)),
			"approved":          plain(answer(keystore.OutcomeParked)),
			"approved, woken":   plain(accepted(1)),
			"rejected":          plain(answer(keystore.OutcomeRejected)),
			"rejected, resumed": plain(answer(keystore.OutcomeRejected)),
		}},
		{"reserve without payload or fingerprint", gatedReserveOf(nil, resumeURL, "carl"), map[string]approvalWant{
			"absent":            plain(refused(errs.InvalidRequest)), // an approval would bind nothing
			"awaiting approval": plain(answer(keystore.OutcomeParked)),
			"approved":          plain(answer(keystore.OutcomeParked)),
			"approved, woken":   plain(refused(errs.InvalidRequest)), // the write must carry what was approved
			"rejected":          plain(answer(keystore.OutcomeRejected)),
			"rejected, resumed": plain(answer(keystore.OutcomeRejected)),
		}},
		{"reserve with another payload", gatedReserveOf(fpB, resumeURL, "carl"), map[string]approvalWant{
			"absent":            parkedAs(keystore.ReasonAwaitingApproval),
			"awaiting approval": plain(refused(errs.KeyReused)),
			"approved":          plain(refused(errs.KeyReused)),
			"approved, woken":   plain(refused(errs.KeyReused)),
			"rejected":          plain(refused(errs.KeyReused)),
			"rejected, resumed": plain(refused(errs.KeyReused)),
		}},
		{"reserve with a payload where the request sent a fingerprint", gatedReserveOf(payloadA, resumeURL, "carl"), map[string]approvalWant{
			"absent":            parkedAs(keystore.ReasonAwaitingApproval),
			"awaiting approval": plain(answer(keystore.OutcomeParked)),
			"approved":          plain(answer(keystore.OutcomeParked)),
			"approved, woken":   plain(refused(errs.KeyReused)), // cannot be shown to be the approved content
			"rejected":          plain(answer(keystore.OutcomeRejected)),
			"rejected, resumed": plain(answer(keystore.OutcomeRejected)),
		}},
		{"approve by another person", approveBy("bob"), map[string]approvalWant{
			"absent":            plain(refused(errs.NotFound)),
			"awaiting approval": {want{outcome: keystore.OutcomeApproved, state: keystore.StateParked}, keystore.ReasonApproved},
			"approved":          plain(answer(keystore.OutcomeApproved)),
			"approved, woken":   plain(answer(keystore.OutcomeApproved)),
			"rejected":          plain(refused(errs.Conflict)),
			"rejected, resumed": plain(refused(errs.Conflict)),
		}},
		{"approve by who triggered it (four eyes)", approveBy("Ann"), map[string]approvalWant{
			"absent":            plain(refused(errs.NotFound)),
			"awaiting approval": plain(refused(errs.Forbidden)),
			"approved":          plain(answer(keystore.OutcomeApproved)),
			"approved, woken":   plain(answer(keystore.OutcomeApproved)),
			"rejected":          plain(refused(errs.Conflict)),
			"rejected, resumed": plain(refused(errs.Conflict)),
		}},
		{"reject with a reason", rejectBy("bob", "wrong amount"), map[string]approvalWant{
			"absent":            plain(refused(errs.NotFound)),
			"awaiting approval": {want{outcome: keystore.OutcomeRejected, state: keystore.StateParked}, keystore.ReasonApprovalRejected},
			"approved":          plain(refused(errs.Conflict)),
			"approved, woken":   plain(refused(errs.Conflict)),
			"rejected":          plain(answer(keystore.OutcomeRejected)),
			"rejected, resumed": plain(answer(keystore.OutcomeRejected)),
		}},
		{"reject without a reason", rejectBy("bob", " "), map[string]approvalWant{
			"absent": plain(refused(errs.InvalidRequest)), "awaiting approval": plain(refused(errs.InvalidRequest)),
			"approved": plain(refused(errs.InvalidRequest)), "approved, woken": plain(refused(errs.InvalidRequest)),
			"rejected": plain(refused(errs.InvalidRequest)), "rejected, resumed": plain(refused(errs.InvalidRequest)),
		}},
		{"claim resume, destination closed", gatedClaim, map[string]approvalWant{
			"absent":            plain(nothing),
			"awaiting approval": plain(nothing),
			"approved":          parkedAs(keystore.ReasonApproved),
			"approved, woken":   plain(nothing),
			"rejected":          parkedAs(keystore.ReasonApprovalRejected),
			"rejected, resumed": plain(nothing),
		}},
		{"claim resume, destination paused", gatedClaimOpen, map[string]approvalWant{
			"absent":            plain(nothing),
			"awaiting approval": plain(nothing),
			"approved":          plain(nothing), // waits for its destination like any parked key
			"approved, woken":   plain(nothing),
			"rejected":          parkedAs(keystore.ReasonApprovalRejected), // writes nothing there: resumed anyway
			"rejected, resumed": plain(nothing),
		}},
		{"resume accepted by n8n", resumeAnswered(keystore.ResumeAccepted), map[string]approvalWant{
			"absent":            plain(nothing),
			"awaiting approval": plain(nothing), // never claimed
			"approved":          plain(nothing), // not claimed: a stale answer (parked again since)
			"approved, woken":   parkedAs(keystore.ReasonApproved),
			"rejected":          {want{outcome: keystore.OutcomeRejected, state: keystore.StateFailed}, keystore.ReasonApprovalRejected},
			"rejected, resumed": plain(nothing),
		}},
		{"resume lost (n8n no longer holds it)", resumeAnswered(keystore.ResumeLost), map[string]approvalWant{
			"absent":            plain(nothing),
			"awaiting approval": plain(nothing), // never called: a stray answer must not let a copy through unapproved
			"approved":          parkedAs(keystore.ReasonResumeLost),
			"approved, woken":   parkedAs(keystore.ReasonResumeLost),
			"rejected":          {want{outcome: keystore.OutcomeRejected, state: keystore.StateFailed}, keystore.ReasonApprovalRejected},
			"rejected, resumed": plain(nothing),
		}},
	}
	for _, ev := range events {
		for _, st := range approvalStates {
			w, ok := ev.want[st]
			if !ok {
				t.Errorf("%s: state %q is not listed", ev.name, st)
				continue
			}
			t.Run(ev.name+"/"+st, func(t *testing.T) {
				f := approvalFixtures[st](t)
				var before *keystore.Record
				if f.cur != nil {
					before = f.cur.Clone()
				}
				s, err := ev.do(f)
				if w.refused != "" {
					if errs.CodeOf(err) != w.refused || s.Record != nil {
						t.Fatalf("got %v (record %v), want refusal %s with nothing written", err, s.Record != nil, w.refused)
					}
					return
				}
				if err != nil {
					t.Fatalf("unexpected refusal: %v", err)
				}
				if s.Result.Outcome != w.outcome {
					t.Errorf("outcome %q, want %q", s.Result.Outcome, w.outcome)
				}
				if w.state == "" {
					if s.Record != nil {
						t.Errorf("wrote a record (%s, %s), want nothing written", s.Record.State, s.Record.Reason)
					}
				} else if s.Record == nil {
					t.Errorf("wrote nothing, want %s", w.state)
				} else {
					if s.Record.State != w.state {
						t.Errorf("state %q, want %q", s.Record.State, w.state)
					}
					if w.reason != "" && s.Record.Reason != w.reason {
						t.Errorf("reason %q, want %q", s.Record.Reason, w.reason)
					}
					if w.attempt != 0 && s.Record.Attempt != w.attempt {
						t.Errorf("attempt %d, want %d", s.Record.Attempt, w.attempt)
					}
				}
				if before != nil && !equalRecords(before, f.cur) {
					t.Errorf("the decision changed its input")
				}
			})
		}
	}
}

func equalRecords(a, b *keystore.Record) bool {
	return a.State == b.State && a.Reason == b.Reason && len(a.History) == len(b.History) && a.UpdatedAt.Equal(b.UpdatedAt)
}

// Who decided, when and why is in the key's history; the rejection's
// reason is the key's message; a request names who triggered it.
func TestApprovalHistory(t *testing.T) {
	f := approvalFixtures["awaiting approval"](t)
	if keystore.RequestedBy(f.cur) != "ann" {
		t.Fatalf("requested by %q, want ann", keystore.RequestedBy(f.cur))
	}
	s, err := rejectBy("bob", "wrong amount")(f)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Record.History[len(s.Record.History)-1]
	if h.Event != keystore.HistoryApprovalRejected || h.By != "bob" || h.Detail != "wrong amount" || !h.At.Equal(now) {
		t.Errorf("history %+v, want approval_rejected by bob at now with the reason", h)
	}
	if s.Record.Message != "wrong amount" || s.Record.Retryable || s.Record.ResolvedBy != "bob" {
		t.Errorf("record %+v: want the reason as message, not retryable, resolved_by bob", s.Record)
	}
	if len(s.Events) != 1 || s.Events[0].Kind != keystore.EventApprovalDecided || s.Events[0].Message != "rejected" {
		t.Errorf("events %+v, want one approval_decided (rejected)", s.Events)
	}
	// Four eyes off: the requester may decide.
	np := gated
	np.Approval.FourEyes = false
	req, _ := keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: "ann"}.Normalize(false)
	if _, err := keystore.DecideApprove(f.cur, req, np, now); err != nil {
		t.Errorf("four eyes off: %v", err)
	}
	// A request whose trigger is not known: anyone may decide.
	g := fixture{cur: must(t)(keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "invoices", Key: "inv_1", ResumeURL: resumeURL}, fpA, gated, t0)).Record}
	if _, err := keystore.DecideApprove(g.cur, req, gated, now); err != nil {
		t.Errorf("no requester: %v", err)
	}
	var e *errs.Error
	_, err = keystore.DecideApprove(f.cur, req, gated, now)
	if !errors.As(err, &e) || e.Code != errs.Forbidden {
		t.Errorf("four eyes: %v, want forbidden", err)
	}
}
