package keystore_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The state machine, transition by transition: every state a key can be in
// against every event, refusals included, straight through the Decide
// functions the stores call (no store in between).

var (
	t0     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now    = t0.Add(2 * time.Second) // every event happens at now
	toUnk  = keystore.Policies{}.Namespace("crm-contacts")
	reclai = keystore.NamespacePolicy{Lease: keystore.DefaultLease, Retention: keystore.DefaultRetention, OnLeaseExpiry: keystore.ExpireReclaim}
	fpA    = keystore.ClientFingerprint("payload a")
	fpB    = keystore.ClientFingerprint("payload b")
)

// A key in each state it can be in, made through the machine itself, with
// the token of its current attempt and the breaker of its destination as
// the key left it (nil: none). An event that brings no breaker of its own
// acts under the fixture's: a probe is a probe only with its breaker.
type fixture struct {
	cur   *keystore.Record
	token string
	br    *keystore.Breaker
}

// breaker is the breaker an event acts under: its own, or the fixture's.
func (f fixture) breaker(own *keystore.Breaker) *keystore.Breaker {
	if own != nil {
		return own
	}
	return f.br
}

func must(t *testing.T) func(keystore.Step, error) keystore.Step {
	return func(s keystore.Step, err error) keystore.Step {
		t.Helper()
		if err != nil {
			t.Fatalf("building the fixture: %v", err)
		}
		return s
	}
}

func reserved(t *testing.T, lease time.Duration) fixture {
	s := must(t)(keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Owner: "wf-1", Lease: lease}, fpA, toUnk, t0))
	return fixture{cur: s.Record, token: s.Result.Token}
}

func failedWith(t *testing.T, reason keystore.Reason) fixture {
	f := reserved(t, time.Minute)
	s := must(t)(keystore.DecideFail(f.cur, nil, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_1", Token: f.token, Reason: reason}, toUnk, keystore.DestinationPolicy{}, t0))
	return fixture{cur: s.Record, token: f.token}
}

var fixtures = map[string]func(t *testing.T) fixture{
	"absent":                  func(t *testing.T) fixture { return fixture{} },
	"reserved":                func(t *testing.T) fixture { return reserved(t, time.Minute) },
	"reserved, lease ran out": func(t *testing.T) fixture { return reserved(t, time.Second) },
	"failed, retryable":       func(t *testing.T) fixture { return failedWith(t, keystore.ReasonDestinationFailed) },
	"failed, final":           func(t *testing.T) fixture { return failedWith(t, keystore.ReasonValidationFailed) },
	"unknown":                 func(t *testing.T) fixture { return failedWith(t, keystore.ReasonOutcomeUnknown) },
	"completed": func(t *testing.T) fixture {
		f := reserved(t, time.Minute)
		s := must(t)(keystore.DecideComplete(f.cur, nil, keystore.CompleteRequest{Namespace: "crm-contacts", Key: "evt_1", Token: f.token}, toUnk, t0))
		return fixture{cur: s.Record, token: f.token}
	},
}

var states = []string{"absent", "reserved", "reserved, lease ran out", "completed", "failed, retryable", "failed, final", "unknown", "parked", "parked, claimed"}

// parkedStates are the other phases of a parked key, in the machine's
// table only (the check table, check_test.go, is about unknown keys).
// With "parked" and "parked, claimed" they are every ParkedPhase.
var parkedStates = []string{"parked, probe", "parked, resumed", "parked, lost", "awaiting approval", "approved", "rejected"}

// phases is the phase of each fixture (PhaseWith its breaker); a fixture
// not listed is not parked.
var phases = map[string]keystore.ParkedPhase{
	"parked":            keystore.PhaseWaiting,
	"parked, claimed":   keystore.PhaseClaimed,
	"parked, probe":     keystore.PhaseProbe,
	"parked, resumed":   keystore.PhaseResumed,
	"parked, lost":      keystore.PhaseLost,
	"awaiting approval": keystore.PhaseAwaitingApproval,
	"approved":          keystore.PhaseApproved,
	"rejected":          keystore.PhaseRejected,
}

const resumeURL = "http://n8n.local/webhook-waiting/4711"

// parked is a key parked by a reserve while crm was paused.
func parked(t *testing.T) fixture {
	s := must(t)(keystore.DecideReserve(nil, pausedCRM(), keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Owner: "wf-1", Destination: "crm", ResumeURL: resumeURL}, fpA, toUnk, t0))
	if s.Record == nil || s.Record.State != keystore.StateParked {
		t.Fatalf("building the fixture: not parked: %+v", s.Result)
	}
	return fixture{cur: s.Record}
}

// claimed is a parked key whose resume call a guard claimed, under br.
func claimed(t *testing.T, br *keystore.Breaker) fixture {
	f := parked(t)
	s, ok := keystore.DecideClaimResume(f.cur, br, time.Minute, toUnk, t0)
	if !ok {
		t.Fatalf("building the fixture: the claim was refused")
	}
	return fixture{cur: s.Record, br: s.Breaker}
}

// answered is a claimed key after n8n's answer a to its resume call.
func answered(t *testing.T, a keystore.ResumeAnswer) fixture {
	f := claimed(t, nil)
	s, ok := keystore.DecideResumeAnswered(f.cur, nil, *f.cur.ParkedAt, a, "404 from n8n", t0)
	if !ok {
		t.Fatalf("building the fixture: answer %d not recorded", a)
	}
	return fixture{cur: s.Record}
}

// approvalCRM is crm-contacts requiring approval: the namespace of the
// approval fixtures, brought by approve and reject. The other events bring
// toUnk: besides those two, only a new key's reserve reads the approval
// policy, and an attempt's content rule, which every reserve here passes
// (fpA; fpB is refused as reused before it).
var approvalCRM = func() keystore.NamespacePolicy {
	np := toUnk
	np.Approval = keystore.ApprovalPolicy{Required: true, FourEyes: true}
	return np
}()

// awaitingApproval is a key whose reserve asked ann's approval.
func awaitingApproval(t *testing.T) fixture {
	return fixture{cur: must(t)(keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Owner: "wf-1",
		Destination: "crm", ResumeURL: resumeURL, RequestedBy: "ann"}, fpA, approvalCRM, t0)).Record}
}

func decideApproval(reject bool, cur *keystore.Record, at time.Time) (keystore.Step, error) {
	req, err := keystore.ApprovalRequest{Namespace: "crm-contacts", Key: "evt_1", By: "bob", Note: "amount checked"}.Normalize(reject)
	if err != nil {
		return keystore.Step{}, err
	}
	if reject {
		return keystore.DecideReject(cur, req, approvalCRM, at)
	}
	return keystore.DecideApprove(cur, req, approvalCRM, at)
}

func init() {
	fixtures["parked"] = parked
	fixtures["parked, claimed"] = func(t *testing.T) fixture { return claimed(t, nil) }
	// The first claim after crm's cooldown makes the key the probe.
	fixtures["parked, probe"] = func(t *testing.T) fixture {
		br := keystore.NewBreaker("crm")
		br.State, br.OpenedAt, br.ReopensAt = keystore.BreakerOpen, ptr(t0.Add(-time.Minute)), &t0
		f := claimed(t, br)
		if p := keystore.PhaseOf(f.cur); p != keystore.PhaseClaimed {
			t.Fatalf("building the fixture: the probe's record alone is %q, want claimed", p)
		}
		return f
	}
	fixtures["parked, resumed"] = func(t *testing.T) fixture { return answered(t, keystore.ResumeAccepted) }
	fixtures["parked, lost"] = func(t *testing.T) fixture { return answered(t, keystore.ResumeLost) }
	fixtures["awaiting approval"] = awaitingApproval
	fixtures["approved"] = func(t *testing.T) fixture {
		return fixture{cur: must(t)(decideApproval(false, awaitingApproval(t).cur, t0)).Record}
	}
	fixtures["rejected"] = func(t *testing.T) fixture {
		return fixture{cur: must(t)(decideApproval(true, awaitingApproval(t).cur, t0)).Record}
	}
}

// pausedCRM is the open breaker of a destination in its cooldown.
func pausedCRM() *keystore.Breaker {
	b := keystore.NewBreaker("crm")
	b.State, b.OpenedAt, b.ReopensAt = keystore.BreakerOpen, &t0, ptr(now.Add(time.Minute))
	return b
}

func ptr(t time.Time) *time.Time { return &t }

// An event applied to a key: what a store would call.
type event func(f fixture) (keystore.Step, error)

func reserveWith(fp keystore.Fingerprint, br *keystore.Breaker, np keystore.NamespacePolicy) event {
	return func(f fixture) (keystore.Step, error) {
		br, dest := f.breaker(br), ""
		if br != nil {
			dest = br.Destination
		}
		return keystore.DecideReserve(f.cur, br, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Owner: "wf-2", Destination: dest}, fp, np, now)
	}
}

func complete(token func(f fixture) string) event {
	return func(f fixture) (keystore.Step, error) {
		return keystore.DecideComplete(f.cur, nil, keystore.CompleteRequest{Namespace: "crm-contacts", Key: "evt_1", Token: token(f), ResultRef: "crm-1"}, toUnk, now)
	}
}

func fail(reason keystore.Reason) event {
	return func(f fixture) (keystore.Step, error) {
		return keystore.DecideFail(f.cur, nil, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_1", Token: f.token, Reason: reason, Message: "503"}, toUnk, keystore.DestinationPolicy{}, now)
	}
}

func resolve(to keystore.State, force bool) event {
	return func(f fixture) (keystore.Step, error) {
		return keystore.DecideResolve(f.cur, keystore.ResolveRequest{Namespace: "crm-contacts", Key: "evt_1", Resolution: to, By: "ops@example", Note: "checked the CRM", Force: force}, toUnk, now)
	}
}

func leaseExpiry(np keystore.NamespacePolicy) event {
	return func(f fixture) (keystore.Step, error) {
		s, ok := keystore.DecideLeaseExpiry(f.cur, np, now)
		if !ok && (s.Record != nil || len(s.Events) > 0) {
			panic("DecideLeaseExpiry: a step without ok")
		}
		return s, nil
	}
}

func reserveParking(f fixture) (keystore.Step, error) {
	return keystore.DecideReserve(f.cur, pausedCRM(), keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Owner: "wf-2", Destination: "crm", ResumeURL: resumeURL + "2"}, fpA, toUnk, now)
}

func reserveParkingClosed(f fixture) (keystore.Step, error) {
	return keystore.DecideReserve(f.cur, keystore.NewBreaker("crm"), keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Owner: "wf-2", Destination: "crm", ResumeURL: resumeURL + "2"}, fpA, toUnk, now)
}

// failParking's failure is the evidence that opens the breaker: another
// key found the destination unreachable before.
func failParking(f fixture) (keystore.Step, error) {
	br := keystore.NewBreaker("crm")
	br.ConsecutiveFailures, br.FailedKeys = 1, []string{keystore.FailedKeyDigest("crm-contacts", "evt_0")}
	return keystore.DecideFail(f.cur, br, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_1", Token: f.token, Reason: keystore.ReasonDestinationUnreachable, ResumeURL: resumeURL}, toUnk, keystore.Policies{}.Destination("crm"), now)
}

func claimResume(f fixture) (keystore.Step, error) {
	s, _ := keystore.DecideClaimResume(f.cur, f.br, time.Minute, toUnk, now)
	return s, nil
}

// parkedAt is when the runner saw the key parked (t0 when it was not).
func parkedAt(f fixture) time.Time {
	if f.cur == nil || f.cur.ParkedAt == nil {
		return t0
	}
	return *f.cur.ParkedAt
}

func resumeAnswered(a keystore.ResumeAnswer) event {
	return func(f fixture) (keystore.Step, error) {
		s, _ := keystore.DecideResumeAnswered(f.cur, f.br, parkedAt(f), a, "404 from n8n", now)
		return s, nil
	}
}

// lateLost is n8n's lost answer to a call about an earlier parking of the
// key: it was reserved since and parked anew, at another parked_at.
func lateLost(f fixture) (keystore.Step, error) {
	s, _ := keystore.DecideResumeAnswered(f.cur, f.br, parkedAt(f).Add(-time.Minute), keystore.ResumeLost, "404 from n8n", now)
	return s, nil
}

// overdue is the runner's report of a key parked for longer than limit.
func overdue(limit time.Duration) event {
	return func(f fixture) (keystore.Step, error) {
		s, _ := keystore.DecideParkedOverdue(f.cur, parkedAt(f), limit, now)
		return s, nil
	}
}

// approve and reject are bob's decisions (ann asked).
func approve(f fixture) (keystore.Step, error) { return decideApproval(false, f.cur, now) }
func reject(f fixture) (keystore.Step, error)  { return decideApproval(true, f.cur, now) }

var (
	currentToken = func(f fixture) string { return f.token }
	staleToken   = func(fixture) string { return "1.00000000000000000000000000000000" }
)

// want is the machine's answer: an outcome and the state of the record it
// writes ("" when it writes none), or a refusal's code with nothing written.
// A parked record written is in a phase: the state alone says parked for
// a key waiting, woken, lost or waiting for a person.
type want struct {
	outcome keystore.Outcome
	state   keystore.State
	phase   keystore.ParkedPhase // of the parked record written (PhaseWith the breaker the step leaves); required with a parked state
	attempt int                  // of the record written, when not 0
	refused errs.Code
	probe   string // "kept" or "freed": evt_1 still is, or no key is, the probe of the breaker the step leaves; "" not checked
}

var (
	accepted = func(attempt int) want {
		return want{outcome: keystore.OutcomeAccepted, state: keystore.StateReserved, attempt: attempt}
	}
	answer = func(o keystore.Outcome) want { return want{outcome: o} } // nothing written
	moves  = func(o keystore.Outcome, s keystore.State) want { return want{outcome: o, state: s} }
	parks  = func(o keystore.Outcome, p keystore.ParkedPhase) want {
		return want{outcome: o, state: keystore.StateParked, phase: p}
	}
	refused = func(c errs.Code) want { return want{refused: c} }
	nothing = want{}
	// keepsProbe and freesProbe state what w leaves of the probe's slot.
	keepsProbe = func(w want) want { w.probe = "kept"; return w }
	freesProbe = func(w want) want { w.probe = "freed"; return w }
)

func TestStateMachineTransitions(t *testing.T) {
	events := []struct {
		name string
		do   event
		want map[string]want // by state; every state must be listed
	}{
		{"reserve", reserveWith(fpA, nil, toUnk), map[string]want{
			"absent":                  accepted(1),
			"reserved":                answer(keystore.OutcomeInProgress),
			"reserved, lease ran out": moves(keystore.OutcomeStateUnknown, keystore.StateUnknown),
			"completed":               answer(keystore.OutcomeDuplicate),
			"failed, retryable":       accepted(2),
			"failed, final":           answer(keystore.OutcomeRejected),
			"unknown":                 answer(keystore.OutcomeStateUnknown),
			"parked":                  accepted(1),
			"parked, claimed":         accepted(1),
			"parked, probe":           keepsProbe(accepted(1)), // its half open breaker lets its own key through
			"parked, resumed":         accepted(1),
			"parked, lost":            accepted(1), // a copy re-sent by its source: a new event
			"awaiting approval":       answer(keystore.OutcomeParked),
			"approved":                answer(keystore.OutcomeParked), // not woken yet
			"rejected":                answer(keystore.OutcomeRejected),
		}},
		{"reserve in a reclaim namespace", reserveWith(fpA, nil, reclai), map[string]want{
			"absent":                  accepted(1),
			"reserved":                answer(keystore.OutcomeInProgress),
			"reserved, lease ran out": accepted(2),
			"completed":               answer(keystore.OutcomeDuplicate),
			"failed, retryable":       accepted(2),
			"failed, final":           answer(keystore.OutcomeRejected),
			"unknown":                 answer(keystore.OutcomeStateUnknown),
			"parked":                  accepted(1),
			"parked, claimed":         accepted(1),
			"parked, probe":           keepsProbe(accepted(1)),
			"parked, resumed":         accepted(1),
			"parked, lost":            accepted(1),
			"awaiting approval":       answer(keystore.OutcomeParked),
			"approved":                answer(keystore.OutcomeParked),
			"rejected":                answer(keystore.OutcomeRejected),
		}},
		{"reserve with another payload", reserveWith(fpB, nil, toUnk), map[string]want{
			"absent":                  accepted(1),
			"reserved":                refused(errs.KeyReused),
			"reserved, lease ran out": refused(errs.KeyReused),
			"completed":               refused(errs.KeyReused),
			"failed, retryable":       refused(errs.KeyReused),
			"failed, final":           refused(errs.KeyReused),
			"unknown":                 refused(errs.KeyReused),
			"parked":                  refused(errs.KeyReused),
			"parked, claimed":         refused(errs.KeyReused),
			"parked, probe":           refused(errs.KeyReused),
			"parked, resumed":         refused(errs.KeyReused),
			"parked, lost":            refused(errs.KeyReused),
			"awaiting approval":       refused(errs.KeyReused),
			"approved":                refused(errs.KeyReused),
			"rejected":                refused(errs.KeyReused),
		}},
		{"reserve for a paused destination", reserveWith(fpA, pausedCRM(), toUnk), map[string]want{
			"absent":                  answer(keystore.OutcomeDestinationPaused),
			"reserved":                answer(keystore.OutcomeInProgress),
			"reserved, lease ran out": moves(keystore.OutcomeStateUnknown, keystore.StateUnknown),
			"completed":               answer(keystore.OutcomeDuplicate),
			"failed, retryable":       answer(keystore.OutcomeDestinationPaused),
			"failed, final":           answer(keystore.OutcomeRejected),
			"unknown":                 answer(keystore.OutcomeStateUnknown),
			"parked":                  answer(keystore.OutcomeParked),
			"parked, claimed":         answer(keystore.OutcomeDestinationPaused),
			"parked, probe":           answer(keystore.OutcomeDestinationPaused),
			"parked, resumed":         answer(keystore.OutcomeDestinationPaused),
			"parked, lost":            answer(keystore.OutcomeDestinationPaused),
			"awaiting approval":       answer(keystore.OutcomeParked),
			"approved":                answer(keystore.OutcomeParked),
			"rejected":                answer(keystore.OutcomeRejected),
		}},
		{"complete", complete(currentToken), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"reserved, lease ran out": moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"completed":               answer(keystore.OutcomeCompleted),
			"failed, retryable":       refused(errs.Conflict),
			"failed, final":           refused(errs.Conflict),
			"unknown":                 moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked":                  refused(errs.StaleToken),
			"parked, claimed":         refused(errs.StaleToken),
			"parked, probe":           refused(errs.StaleToken),
			"parked, resumed":         refused(errs.StaleToken),
			"parked, lost":            refused(errs.StaleToken),
			"awaiting approval":       refused(errs.StaleToken),
			"approved":                refused(errs.StaleToken),
			"rejected":                refused(errs.StaleToken),
		}},
		{"complete with a stale token", complete(staleToken), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                refused(errs.StaleToken),
			"reserved, lease ran out": refused(errs.StaleToken),
			"completed":               refused(errs.StaleToken),
			"failed, retryable":       refused(errs.StaleToken),
			"failed, final":           refused(errs.StaleToken),
			"unknown":                 refused(errs.StaleToken),
			"parked":                  refused(errs.StaleToken),
			"parked, claimed":         refused(errs.StaleToken),
			"parked, probe":           refused(errs.StaleToken),
			"parked, resumed":         refused(errs.StaleToken),
			"parked, lost":            refused(errs.StaleToken),
			"awaiting approval":       refused(errs.StaleToken),
			"approved":                refused(errs.StaleToken),
			"rejected":                refused(errs.StaleToken),
		}},
		{"fail: destination_failed", fail(keystore.ReasonDestinationFailed), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                moves(keystore.OutcomeDestinationFailed, keystore.StateFailed),
			"reserved, lease ran out": moves(keystore.OutcomeDestinationFailed, keystore.StateFailed),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       answer(keystore.OutcomeDestinationFailed),
			"failed, final":           refused(errs.Conflict),
			"unknown":                 moves(keystore.OutcomeDestinationFailed, keystore.StateFailed),
			"parked":                  refused(errs.StaleToken),
			"parked, claimed":         refused(errs.StaleToken),
			"parked, probe":           refused(errs.StaleToken),
			"parked, resumed":         refused(errs.StaleToken),
			"parked, lost":            refused(errs.StaleToken),
			"awaiting approval":       refused(errs.StaleToken),
			"approved":                refused(errs.StaleToken),
			"rejected":                refused(errs.StaleToken),
		}},
		{"fail: validation_failed", fail(keystore.ReasonValidationFailed), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                moves(keystore.OutcomeRejected, keystore.StateFailed),
			"reserved, lease ran out": moves(keystore.OutcomeRejected, keystore.StateFailed),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       refused(errs.Conflict),
			"failed, final":           answer(keystore.OutcomeRejected),
			"unknown":                 moves(keystore.OutcomeRejected, keystore.StateFailed),
			"parked":                  refused(errs.StaleToken),
			"parked, claimed":         refused(errs.StaleToken),
			"parked, probe":           refused(errs.StaleToken),
			"parked, resumed":         refused(errs.StaleToken),
			"parked, lost":            refused(errs.StaleToken),
			"awaiting approval":       refused(errs.StaleToken),
			"approved":                refused(errs.StaleToken),
			"rejected":                refused(errs.StaleToken),
		}},
		{"fail: outcome_unknown", fail(keystore.ReasonOutcomeUnknown), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                moves(keystore.OutcomeStateUnknown, keystore.StateUnknown),
			"reserved, lease ran out": moves(keystore.OutcomeStateUnknown, keystore.StateUnknown),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       refused(errs.Conflict),
			"failed, final":           refused(errs.Conflict),
			"unknown":                 answer(keystore.OutcomeStateUnknown),
			"parked":                  refused(errs.StaleToken),
			"parked, claimed":         refused(errs.StaleToken),
			"parked, probe":           refused(errs.StaleToken),
			"parked, resumed":         refused(errs.StaleToken),
			"parked, lost":            refused(errs.StaleToken),
			"awaiting approval":       refused(errs.StaleToken),
			"approved":                refused(errs.StaleToken),
			"rejected":                refused(errs.StaleToken),
		}},
		{"resolve to completed", resolve(keystore.StateCompleted, false), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                refused(errs.Conflict),
			"reserved, lease ran out": moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"completed":               answer(keystore.OutcomeCompleted),
			"failed, retryable":       moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"failed, final":           moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"unknown":                 moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked":                  refused(errs.ParkedWaiting), // its execution waits for the resume call (resolve_parked.go)
			"parked, claimed":         refused(errs.ParkedWaiting), // its execution waits for the resume call (resolve_parked.go)
			"parked, probe":           refused(errs.ParkedWaiting), // its execution waits for the resume call (resolve_parked.go)
			"parked, resumed":         moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked, lost":            moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"awaiting approval":       refused(errs.Conflict),      // approvals decide it
			"approved":                refused(errs.ParkedWaiting), // its execution waits for the resume call (resolve_parked.go)
			"rejected":                refused(errs.Conflict),
		}},
		{"resolve to completed with force", resolve(keystore.StateCompleted, true), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"reserved, lease ran out": moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"completed":               answer(keystore.OutcomeCompleted),
			"failed, retryable":       moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"failed, final":           moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"unknown":                 moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked":                  moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked, claimed":         moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked, probe":           moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked, resumed":         moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked, lost":            moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"awaiting approval":       refused(errs.Conflict),
			"approved":                moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"rejected":                refused(errs.Conflict),
		}},
		{"resolve to failed", resolve(keystore.StateFailed, false), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                refused(errs.Conflict),
			"reserved, lease ran out": moves(keystore.OutcomeFailed, keystore.StateFailed),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       moves(keystore.OutcomeFailed, keystore.StateFailed),
			"failed, final":           moves(keystore.OutcomeFailed, keystore.StateFailed),
			"unknown":                 moves(keystore.OutcomeFailed, keystore.StateFailed),
			"parked":                  refused(errs.ParkedWaiting), // its execution waits for the resume call (resolve_parked.go)
			"parked, claimed":         refused(errs.ParkedWaiting), // its execution waits for the resume call (resolve_parked.go)
			"parked, probe":           refused(errs.ParkedWaiting), // its execution waits for the resume call (resolve_parked.go)
			"parked, resumed":         moves(keystore.OutcomeFailed, keystore.StateFailed),
			"parked, lost":            moves(keystore.OutcomeFailed, keystore.StateFailed),
			"awaiting approval":       refused(errs.Conflict),
			"approved":                refused(errs.ParkedWaiting), // its execution waits for the resume call (resolve_parked.go)
			"rejected":                refused(errs.Conflict),
		}},
		{"reserve with a resume_url for a paused destination", reserveParking, map[string]want{
			"absent":                  parks(keystore.OutcomeParked, keystore.PhaseWaiting),
			"reserved":                answer(keystore.OutcomeInProgress),
			"reserved, lease ran out": moves(keystore.OutcomeStateUnknown, keystore.StateUnknown),
			"completed":               answer(keystore.OutcomeDuplicate),
			"failed, retryable":       parks(keystore.OutcomeParked, keystore.PhaseWaiting),
			"failed, final":           answer(keystore.OutcomeRejected),
			"unknown":                 answer(keystore.OutcomeStateUnknown),
			"parked":                  answer(keystore.OutcomeParked),                       // a copy: no second write
			"parked, claimed":         parks(keystore.OutcomeParked, keystore.PhaseWaiting), // woken too early: parked again
			"parked, probe":           parks(keystore.OutcomeParked, keystore.PhaseWaiting),
			"parked, resumed":         parks(keystore.OutcomeParked, keystore.PhaseWaiting), // woken too early: parked again
			"parked, lost":            parks(keystore.OutcomeParked, keystore.PhaseWaiting), // a copy re-sent by its source, queued as a new parking (TestEveryNewParkingHasItsOwnParkedAt)
			"awaiting approval":       answer(keystore.OutcomeParked),
			"approved":                answer(keystore.OutcomeParked),
			"rejected":                answer(keystore.OutcomeRejected),
		}},
		{"reserve with a resume_url, destination closed", reserveParkingClosed, map[string]want{
			"absent":                  accepted(1),
			"reserved":                answer(keystore.OutcomeInProgress),
			"reserved, lease ran out": moves(keystore.OutcomeStateUnknown, keystore.StateUnknown),
			"completed":               answer(keystore.OutcomeDuplicate),
			"failed, retryable":       accepted(2),
			"failed, final":           answer(keystore.OutcomeRejected),
			"unknown":                 answer(keystore.OutcomeStateUnknown),
			"parked":                  accepted(1),
			"parked, claimed":         accepted(1),
			"parked, probe":           accepted(1),
			"parked, resumed":         accepted(1),
			"parked, lost":            accepted(1),
			"awaiting approval":       answer(keystore.OutcomeParked),
			"approved":                answer(keystore.OutcomeParked),
			"rejected":                answer(keystore.OutcomeRejected),
		}},
		{"fail: destination_unreachable with a resume_url", failParking, map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                parks(keystore.OutcomeParked, keystore.PhaseWaiting),
			"reserved, lease ran out": parks(keystore.OutcomeParked, keystore.PhaseWaiting),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       refused(errs.Conflict),
			"failed, final":           refused(errs.Conflict),
			"unknown":                 parks(keystore.OutcomeParked, keystore.PhaseWaiting),
			"parked":                  refused(errs.StaleToken),
			"parked, claimed":         refused(errs.StaleToken),
			"parked, probe":           refused(errs.StaleToken),
			"parked, resumed":         refused(errs.StaleToken),
			"parked, lost":            refused(errs.StaleToken),
			"awaiting approval":       refused(errs.StaleToken),
			"approved":                refused(errs.StaleToken),
			"rejected":                refused(errs.StaleToken),
		}},
		{"claim the resume call (catch-up)", claimResume, map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  parks(keystore.OutcomeParked, keystore.PhaseClaimed),
			"parked, claimed":         nothing,             // another guard holds the call
			"parked, probe":           keepsProbe(nothing), // its own claim holds the call
			"parked, resumed":         nothing,
			"parked, lost":            nothing, // never resumed again
			"awaiting approval":       nothing,
			"approved":                parks(keystore.OutcomeParked, keystore.PhaseApproved), // the approval resumer's claim
			"rejected":                parks(keystore.OutcomeParked, keystore.PhaseRejected), // resumed to end, whatever the breaker
		}},
		{"n8n accepted the resume call", resumeAnswered(keystore.ResumeAccepted), map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  nothing, // not claimed: a stale answer (the woken execution parked the key again)
			"parked, claimed":         parks(keystore.OutcomeParked, keystore.PhaseResumed),
			"parked, probe":           keepsProbe(parks(keystore.OutcomeParked, keystore.PhaseResumed)),
			"parked, resumed":         nothing,
			"parked, lost":            nothing,
			"awaiting approval":       nothing,
			"approved":                nothing,                                               // not claimed
			"rejected":                moves(keystore.OutcomeRejected, keystore.StateFailed), // it reserves, is answered rejected and ends
		}},
		{"n8n lost the parked execution", resumeAnswered(keystore.ResumeLost), map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  parks(keystore.OutcomeParked, keystore.PhaseLost), // taken without a claim; a woken execution that parked again has a new parked_at, so a stale claimant's answer names another parking (TestStaleResumeAnswerDoesNotStrandAReparkedKey)
			"parked, claimed":         parks(keystore.OutcomeParked, keystore.PhaseLost),
			"parked, probe":           freesProbe(parks(keystore.OutcomeParked, keystore.PhaseLost)),
			"parked, resumed":         nothing,                                           // a stale claimant's answer: the execution lives
			"parked, lost":            nothing,                                           // told once
			"awaiting approval":       nothing,                                           // never called: a stray answer must not let a copy through unapproved
			"approved":                parks(keystore.OutcomeParked, keystore.PhaseLost), // as parked: not claimed
			"rejected":                moves(keystore.OutcomeRejected, keystore.StateFailed),
		}},
		{"n8n lost the execution of an earlier parking (a late answer)", lateLost, map[string]want{ // parked_at tells the parkings apart
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  nothing,
			"parked, claimed":         nothing,
			"parked, probe":           keepsProbe(nothing),
			"parked, resumed":         nothing,
			"parked, lost":            nothing,
			"awaiting approval":       nothing,
			"approved":                nothing,
			"rejected":                nothing,
		}},
		{"n8n's woken execution went silent (the runner's finding)", resumeAnswered(keystore.ResumeSilent), map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  nothing, // not woken: not silent
			"parked, claimed":         nothing, // n8n did not take the call (yet)
			"parked, probe":           keepsProbe(nothing),
			"parked, resumed":         parks(keystore.OutcomeParked, keystore.PhaseLost),
			"parked, lost":            nothing, // told once
			"awaiting approval":       nothing,
			"approved":                nothing,
			"rejected":                nothing,
		}},
		{"n8n did not take the resume call (retry)", resumeAnswered(keystore.ResumeRetry), map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  nothing,                                                          // nobody holds the call
			"parked, claimed":         parks(keystore.OutcomeParked, keystore.PhaseWaiting),             // the claim is dropped: called again
			"parked, probe":           keepsProbe(parks(keystore.OutcomeParked, keystore.PhaseWaiting)), // its slot waits for its next claim
			"parked, resumed":         nothing,                                                          // a stale claimant's answer
			"parked, lost":            nothing,
			"awaiting approval":       nothing,
			"approved":                nothing,
			"rejected":                nothing, // not claimed
		}},
		{"parked longer than parked_limit (the runner's report)", overdue(time.Second), map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  parks(keystore.OutcomeParked, keystore.PhaseWaiting),
			"parked, claimed":         parks(keystore.OutcomeParked, keystore.PhaseClaimed),
			"parked, probe":           keepsProbe(parks(keystore.OutcomeParked, keystore.PhaseProbe)),
			"parked, resumed":         parks(keystore.OutcomeParked, keystore.PhaseResumed),          // the runner asks only about its queue: waiting and claimed
			"parked, lost":            nothing,                                                       // its owner was told already
			"awaiting approval":       parks(keystore.OutcomeParked, keystore.PhaseAwaitingApproval), // not in the runner's queue either
			"approved":                parks(keystore.OutcomeParked, keystore.PhaseApproved),
			"rejected":                parks(keystore.OutcomeParked, keystore.PhaseRejected),
		}},
		{"approve", approve, map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                refused(errs.Conflict),
			"reserved, lease ran out": refused(errs.Conflict),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       refused(errs.Conflict),
			"failed, final":           refused(errs.Conflict),
			"unknown":                 refused(errs.Conflict),
			"parked":                  refused(errs.Conflict), // does not await approval
			"parked, claimed":         refused(errs.Conflict),
			"parked, probe":           refused(errs.Conflict),
			"parked, resumed":         refused(errs.Conflict),
			"parked, lost":            refused(errs.Conflict),
			"awaiting approval":       parks(keystore.OutcomeApproved, keystore.PhaseApproved),
			"approved":                answer(keystore.OutcomeApproved), // a repeated click
			"rejected":                refused(errs.Conflict),
		}},
		{"reject", reject, map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                refused(errs.Conflict),
			"reserved, lease ran out": refused(errs.Conflict),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       refused(errs.Conflict),
			"failed, final":           refused(errs.Conflict),
			"unknown":                 refused(errs.Conflict),
			"parked":                  refused(errs.Conflict),
			"parked, claimed":         refused(errs.Conflict),
			"parked, probe":           refused(errs.Conflict),
			"parked, resumed":         refused(errs.Conflict),
			"parked, lost":            refused(errs.Conflict),
			"awaiting approval":       parks(keystore.OutcomeRejected, keystore.PhaseRejected),
			"approved":                refused(errs.Conflict),
			"rejected":                answer(keystore.OutcomeRejected), // a repeated click
		}},
		{"lease expiry (the sweeper)", leaseExpiry(toUnk), map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": want{state: keystore.StateUnknown},
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  nothing,
			"parked, claimed":         nothing,
			"parked, probe":           nothing,
			"parked, resumed":         nothing,
			"parked, lost":            nothing,
			"awaiting approval":       nothing,
			"approved":                nothing,
			"rejected":                nothing,
		}},
		{"lease expiry in a reclaim namespace", leaseExpiry(reclai), map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing, // the next reserve reclaims it
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  nothing,
			"parked, claimed":         nothing,
			"parked, probe":           nothing,
			"parked, resumed":         nothing,
			"parked, lost":            nothing,
			"awaiting approval":       nothing,
			"approved":                nothing,
			"rejected":                nothing,
		}},
	}
	all := append(slices.Clone(states), parkedStates...)
	for _, ev := range events {
		if len(ev.want) != len(all) {
			t.Fatalf("%s: %d states listed, want all %d", ev.name, len(ev.want), len(all))
		}
		for _, from := range all {
			w, ok := ev.want[from]
			if !ok {
				t.Fatalf("%s: state %q not listed", ev.name, from)
			}
			if w.state == keystore.StateParked && w.phase == "" {
				t.Fatalf("%s when %s: the cell writes a parked record and must state its phase", ev.name, from)
			}
			t.Run(ev.name+" when "+from, func(t *testing.T) {
				f := fixtures[from](t)
				if p := keystore.PhaseWith(f.cur, f.br); p != phases[from] {
					t.Fatalf("the fixture is in phase %q, want %q", p, phases[from])
				}
				before := f.cur.Clone()
				s, err := ev.do(f)
				if !reflect.DeepEqual(before, f.cur) {
					t.Fatalf("the decision changed its input record:\nbefore %+v\nafter  %+v", before, f.cur)
				}
				if w.refused != "" {
					if code := errs.CodeOf(err); code != w.refused {
						t.Fatalf("want refusal %s, got %v (step %+v)", w.refused, err, s)
					}
					if s.Record != nil || s.Breaker != nil || len(s.Events) > 0 {
						t.Fatalf("a refusal must write nothing, got %+v", s)
					}
					return
				}
				if err != nil {
					t.Fatalf("want %s, refused: %v", w.outcome, err)
				}
				if s.Result.Outcome != w.outcome {
					t.Errorf("outcome %q, want %q", s.Result.Outcome, w.outcome)
				}
				switch {
				case w.state == "" && s.Record != nil:
					t.Errorf("wrote a record in state %s, want nothing written", s.Record.State)
				case w.state != "" && s.Record == nil:
					t.Errorf("wrote nothing, want a record in state %s", w.state)
				case w.state != "" && s.Record.State != w.state:
					t.Errorf("wrote state %s, want %s", s.Record.State, w.state)
				case w.attempt != 0 && s.Record.Attempt != w.attempt:
					t.Errorf("attempt %d, want %d", s.Record.Attempt, w.attempt)
				}
				left := f.br // the breaker the step leaves
				if s.Breaker != nil {
					left = s.Breaker
				}
				if s.Record != nil {
					if p := keystore.PhaseWith(s.Record, left); p != w.phase {
						t.Errorf("wrote phase %q, want %q", p, w.phase)
					}
					if p := keystore.PhaseWith(s.Record, left); p == keystore.PhaseLost && phases[from] != p && !hasEvent(s, keystore.EventParkedLost) {
						t.Errorf("a key was lost without an event for its owner")
					}
				}
				switch isProbe := left != nil && left.ProbeNamespace == "crm-contacts" && left.ProbeKey == "evt_1"; {
				case w.probe == "kept" && !isProbe:
					t.Errorf("evt_1 is no longer the probe: %+v", left)
				case w.probe == "freed" && (s.Breaker == nil || s.Breaker.ProbeKey != ""):
					t.Errorf("the probe's slot was not freed: %+v", s.Breaker)
				}
				if w.outcome == keystore.OutcomeAccepted && (s.Result.Token == "" || !s.Result.Proceed) {
					t.Errorf("accepted without a token to proceed with: %+v", s.Result)
				}
				if w.outcome != keystore.OutcomeAccepted && s.Result.Token != "" {
					t.Errorf("%s handed out a token", w.outcome)
				}
				if w.state == keystore.StateUnknown && len(s.Events) == 0 {
					t.Errorf("a key moved to unknown without an event for the person who decides")
				}
			})
		}
	}
}

func hasEvent(s keystore.Step, k keystore.EventKind) bool {
	return slices.ContainsFunc(s.Events, func(e keystore.Event) bool { return e.Kind == k })
}

// The destination breaker, transition by transition: each breaker state
// against a reserve and the reports of the probe and of other keys.
func TestBreakerTransitions(t *testing.T) {
	threshold := keystore.Policies{}.Destination("crm").FailureThreshold
	unreachable := keystore.Policies{}.Destination("crm").UnreachableThreshold
	breakers := map[string]func() *keystore.Breaker{
		"closed": func() *keystore.Breaker { return keystore.NewBreaker("crm") },
		// counted by a release that kept no digests: other keys count on
		"closed, one failure short": func() *keystore.Breaker {
			b := keystore.NewBreaker("crm")
			b.ConsecutiveFailures = threshold - 1
			return b
		},
		"closed, one failure short, evt_2 among them": func() *keystore.Breaker {
			b := keystore.NewBreaker("crm")
			b.ConsecutiveFailures = threshold - 1
			b.FailedKeys = []string{keystore.FailedKeyDigest("crm-contacts", "evt_2")}
			for i := 3; len(b.FailedKeys) < threshold-1; i++ {
				b.FailedKeys = append(b.FailedKeys, keystore.FailedKeyDigest("crm-contacts", fmt.Sprintf("evt_%d", i)))
			}
			return b
		},
		"closed, one unreachable short": func() *keystore.Breaker {
			b := keystore.NewBreaker("crm")
			b.ConsecutiveFailures = unreachable - 1
			b.FailedKeys = []string{keystore.FailedKeyDigest("crm-contacts", "evt_0")}
			return b
		},
		// open after the probe "probe" failed
		"open": func() *keystore.Breaker {
			b := pausedCRM()
			b.ProbeNamespace, b.ProbeKey = "crm-contacts", "probe"
			return b
		},
		"open, cooldown over": func() *keystore.Breaker {
			b := pausedCRM()
			b.ProbeNamespace, b.ProbeKey = "crm-contacts", "probe"
			b.ReopensAt = ptr(now.Add(-time.Second))
			return b
		},
		"half open, probe out": func() *keystore.Breaker {
			b := keystore.NewBreaker("crm")
			b.State, b.ProbeNamespace, b.ProbeKey, b.ProbeUntil = keystore.BreakerHalfOpen, "crm-contacts", "probe", ptr(now.Add(time.Minute))
			return b
		},
		"half open, probe's lease ran out": func() *keystore.Breaker {
			b := keystore.NewBreaker("crm")
			b.State, b.ProbeNamespace, b.ProbeKey, b.ProbeUntil = keystore.BreakerHalfOpen, "crm-contacts", "probe", ptr(now.Add(-time.Second))
			return b
		},
	}
	order := []string{"closed", "closed, one failure short", "closed, one failure short, evt_2 among them", "closed, one unreachable short", "open", "open, cooldown over", "half open, probe out", "half open, probe's lease ran out"}

	// holding reserves key for crm without a breaker, so the key has a
	// current attempt whose holder can report.
	holding := func(t *testing.T, key string) fixture {
		s := must(t)(keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Destination: "crm"}, nil, toUnk, t0))
		return fixture{cur: s.Record, token: s.Result.Token}
	}
	type report func(t *testing.T, br *keystore.Breaker) (keystore.Step, error)
	reserve := func(t *testing.T, br *keystore.Breaker) (keystore.Step, error) {
		return keystore.DecideReserve(nil, br, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_9", Destination: "crm"}, nil, toUnk, now)
	}
	reserveKey := func(key string) report {
		return func(t *testing.T, br *keystore.Breaker) (keystore.Step, error) {
			return keystore.DecideReserve(nil, br, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Destination: "crm"}, nil, toUnk, now)
		}
	}
	completes := func(key string) report {
		return func(t *testing.T, br *keystore.Breaker) (keystore.Step, error) {
			f := holding(t, key)
			return keystore.DecideComplete(f.cur, br, keystore.CompleteRequest{Namespace: "crm-contacts", Key: key, Token: f.token}, toUnk, now)
		}
	}
	fails := func(key string, reason keystore.Reason) report {
		return func(t *testing.T, br *keystore.Breaker) (keystore.Step, error) {
			f := holding(t, key)
			return keystore.DecideFail(f.cur, br, keystore.FailRequest{Namespace: "crm-contacts", Key: key, Token: f.token, Reason: reason}, toUnk, keystore.Policies{}.Destination("crm"), now)
		}
	}
	type bwant struct {
		state    keystore.BreakerState
		failures int
		event    keystore.EventKind // "" for none
		outcome  keystore.Outcome   // checked when set
	}
	var (
		closed   = bwant{state: keystore.BreakerClosed}
		open     = bwant{state: keystore.BreakerOpen}
		halfOpen = bwant{state: keystore.BreakerHalfOpen}
		closes   = bwant{state: keystore.BreakerClosed, event: keystore.EventBreakerClosed}
		opensAt  = func(failures int) bwant {
			return bwant{state: keystore.BreakerOpen, failures: failures, event: keystore.EventBreakerOpened}
		}
		short            = bwant{state: keystore.BreakerClosed, failures: threshold - 1}
		unreachableShort = bwant{state: keystore.BreakerClosed, failures: unreachable - 1}
		closedAt         = func(failures int) bwant { return bwant{state: keystore.BreakerClosed, failures: failures} }
	)
	with := func(w bwant, o keystore.Outcome) bwant { w.outcome = o; return w }
	events := []struct {
		name string
		do   report
		want map[string]bwant
	}{
		{"a reserve", reserve, map[string]bwant{
			"closed":                    with(closed, keystore.OutcomeAccepted),
			"closed, one failure short": with(short, keystore.OutcomeAccepted),
			"closed, one failure short, evt_2 among them": with(short, keystore.OutcomeAccepted),
			"closed, one unreachable short":               with(unreachableShort, keystore.OutcomeAccepted),
			"open":                                        with(open, keystore.OutcomeDestinationPaused),
			"open, cooldown over":                         with(halfOpen, keystore.OutcomeAccepted), // it becomes the probe
			"half open, probe out":                        with(halfOpen, keystore.OutcomeDestinationPaused),
			"half open, probe's lease ran out":            with(halfOpen, keystore.OutcomeAccepted), // the new probe
		}},
		{"the probe's own key reserves (a parked key resumed as the probe)", reserveKey("probe"), map[string]bwant{
			"closed":                    with(closed, keystore.OutcomeAccepted),
			"closed, one failure short": with(short, keystore.OutcomeAccepted),
			"closed, one failure short, evt_2 among them": with(short, keystore.OutcomeAccepted),
			"closed, one unreachable short":               with(unreachableShort, keystore.OutcomeAccepted),
			"open":                                        with(open, keystore.OutcomeDestinationPaused),
			"open, cooldown over":                         with(halfOpen, keystore.OutcomeAccepted),
			"half open, probe out":                        with(halfOpen, keystore.OutcomeAccepted),
			"half open, probe's lease ran out":            with(halfOpen, keystore.OutcomeAccepted),
		}},
		{"the probe completes", completes("probe"), map[string]bwant{
			"closed":                    closed,
			"closed, one failure short": closed,
			"closed, one failure short, evt_2 among them": closed,
			"closed, one unreachable short":               closed,
			"open":                                        closes, // its late success proves the destination is back
			"open, cooldown over":                         closes,
			"half open, probe out":                        closes,
			"half open, probe's lease ran out":            closes,
		}},
		{"another key completes", completes("evt_2"), map[string]bwant{
			"closed":                    closed,
			"closed, one failure short": closed,
			"closed, one failure short, evt_2 among them": closed,
			"closed, one unreachable short":               closed,
			"open":                                        open, // a straggler from before the outage
			"open, cooldown over":                         open,
			"half open, probe out":                        closes,
			"half open, probe's lease ran out":            closes,
		}},
		{"the probe fails", fails("probe", keystore.ReasonDestinationFailed), map[string]bwant{
			"closed":                    bwant{state: keystore.BreakerClosed, failures: 1},
			"closed, one failure short": opensAt(threshold),
			"closed, one failure short, evt_2 among them": opensAt(threshold),
			"closed, one unreachable short":               closedAt(unreachable),
			"open":                                        open,
			"open, cooldown over":                         open,
			"half open, probe out":                        open, // re-opened, not announced again
			"half open, probe's lease ran out":            open,
		}},
		{"another key fails", fails("evt_2", keystore.ReasonDestinationFailed), map[string]bwant{
			"closed":                    bwant{state: keystore.BreakerClosed, failures: 1},
			"closed, one failure short": opensAt(threshold),
			"closed, one failure short, evt_2 among them": short, // evt_2 failed before: no new evidence
			"closed, one unreachable short":               closedAt(unreachable),
			"open":                                        open,
			"open, cooldown over":                         open,
			"half open, probe out":                        halfOpen, // says nothing about now
			"half open, probe's lease ran out":            halfOpen,
		}},
		{"a key finds the destination unreachable", fails("evt_2", keystore.ReasonDestinationUnreachable), map[string]bwant{
			"closed":                    closedAt(1), // one key is one caller's word
			"closed, one failure short": opensAt(threshold),
			"closed, one failure short, evt_2 among them": short, // evt_2 counted already
			"closed, one unreachable short":               opensAt(unreachable),
			"open":                                        open,
			"open, cooldown over":                         open,
			"half open, probe out":                        halfOpen,
			"half open, probe's lease ran out":            halfOpen,
		}},
		{"the destination refuses the data (validation_failed)", fails("probe", keystore.ReasonValidationFailed), map[string]bwant{
			"closed":                    closed, // it answered: it is up
			"closed, one failure short": closed,
			"closed, one failure short, evt_2 among them": closed,
			"closed, one unreachable short":               closed,
			"open":                                        closes,
			"open, cooldown over":                         closes,
			"half open, probe out":                        closes,
			"half open, probe's lease ran out":            closes,
		}},
	}
	for _, ev := range events {
		if len(ev.want) != len(order) {
			t.Fatalf("%s: %d breaker states listed, want all %d", ev.name, len(ev.want), len(order))
		}
		for _, from := range order {
			w := ev.want[from]
			t.Run(ev.name+" when "+from, func(t *testing.T) {
				br := breakers[from]()
				before := br.Clone()
				s, err := ev.do(t, br)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(before, br) {
					t.Fatalf("the decision changed its input breaker")
				}
				if s.Breaker == nil {
					t.Fatalf("no breaker in the step")
				}
				if s.Breaker.State != w.state || s.Breaker.ConsecutiveFailures != w.failures {
					t.Errorf("breaker %s with %d failures, want %s with %d", s.Breaker.State, s.Breaker.ConsecutiveFailures, w.state, w.failures)
				}
				var kinds []keystore.EventKind
				for _, e := range s.Events {
					if e.Kind != keystore.EventKeyUnknown {
						kinds = append(kinds, e.Kind)
					}
				}
				switch {
				case w.event == "" && len(kinds) > 0:
					t.Errorf("events %v, want none", kinds)
				case w.event != "" && (len(kinds) != 1 || kinds[0] != w.event):
					t.Errorf("events %v, want one %s", kinds, w.event)
				}
				if w.outcome != "" && s.Result.Outcome != w.outcome {
					t.Errorf("outcome %s, want %s", s.Result.Outcome, w.outcome)
				}
				if s.Result.Outcome == keystore.OutcomeDestinationPaused && s.Record != nil {
					t.Errorf("a paused reserve recorded the key")
				}
			})
		}
	}
}
