package keystore_test

import (
	"fmt"
	"reflect"
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
// the token of its current attempt.
type fixture struct {
	cur   *keystore.Record
	token string
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
	return fixture{s.Record, s.Result.Token}
}

func failedWith(t *testing.T, reason keystore.Reason) fixture {
	f := reserved(t, time.Minute)
	s := must(t)(keystore.DecideFail(f.cur, nil, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_1", Token: f.token, Reason: reason}, toUnk, keystore.DestinationPolicy{}, t0))
	return fixture{s.Record, f.token}
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
		return fixture{s.Record, f.token}
	},
}

var states = []string{"absent", "reserved", "reserved, lease ran out", "completed", "failed, retryable", "failed, final", "unknown", "parked", "parked, woken"}

const resumeURL = "http://n8n.local/webhook-waiting/4711"

// parked is a key parked by a reserve while crm was paused.
func parked(t *testing.T) fixture {
	s := must(t)(keystore.DecideReserve(nil, pausedCRM(), keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Owner: "wf-1", Destination: "crm", ResumeURL: resumeURL}, fpA, toUnk, t0))
	if s.Record == nil || s.Record.State != keystore.StateParked {
		t.Fatalf("building the fixture: not parked: %+v", s.Result)
	}
	return fixture{cur: s.Record}
}

func init() {
	fixtures["parked"] = parked
	fixtures["parked, woken"] = func(t *testing.T) fixture {
		f := parked(t)
		s, ok := keystore.DecideClaimResume(f.cur, nil, time.Minute, toUnk, t0)
		if !ok {
			t.Fatalf("building the fixture: the claim was refused")
		}
		return fixture{cur: s.Record}
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
		dest := ""
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
	s, _ := keystore.DecideClaimResume(f.cur, nil, time.Minute, toUnk, now)
	return s, nil
}

func resumeAnswered(a keystore.ResumeAnswer) event {
	return func(f fixture) (keystore.Step, error) {
		if f.cur == nil || f.cur.ParkedAt == nil {
			s, _ := keystore.DecideResumeAnswered(f.cur, nil, t0, a, "404 from n8n", now)
			return s, nil
		}
		s, _ := keystore.DecideResumeAnswered(f.cur, nil, *f.cur.ParkedAt, a, "404 from n8n", now)
		return s, nil
	}
}

var (
	currentToken = func(f fixture) string { return f.token }
	staleToken   = func(fixture) string { return "1.00000000000000000000000000000000" }
)

// want is the machine's answer: an outcome and the state of the record it
// writes ("" when it writes none), or a refusal's code with nothing written.
type want struct {
	outcome keystore.Outcome
	state   keystore.State
	attempt int // of the record written, when not 0
	refused errs.Code
}

var (
	accepted = func(attempt int) want {
		return want{outcome: keystore.OutcomeAccepted, state: keystore.StateReserved, attempt: attempt}
	}
	answer  = func(o keystore.Outcome) want { return want{outcome: o} } // nothing written
	moves   = func(o keystore.Outcome, s keystore.State) want { return want{outcome: o, state: s} }
	refused = func(c errs.Code) want { return want{refused: c} }
	nothing = want{}
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
			"parked, woken":           accepted(1),
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
			"parked, woken":           accepted(1),
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
			"parked, woken":           refused(errs.KeyReused),
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
			"parked, woken":           answer(keystore.OutcomeDestinationPaused),
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
			"parked, woken":           refused(errs.StaleToken),
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
			"parked, woken":           refused(errs.StaleToken),
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
			"parked, woken":           refused(errs.StaleToken),
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
			"parked, woken":           refused(errs.StaleToken),
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
			"parked, woken":           refused(errs.StaleToken),
		}},
		{"resolve to completed", resolve(keystore.StateCompleted, false), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                refused(errs.Conflict),
			"reserved, lease ran out": moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"completed":               answer(keystore.OutcomeCompleted),
			"failed, retryable":       moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"failed, final":           moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"unknown":                 moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked":                  moves(keystore.OutcomeCompleted, keystore.StateCompleted),
			"parked, woken":           moves(keystore.OutcomeCompleted, keystore.StateCompleted),
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
			"parked, woken":           moves(keystore.OutcomeCompleted, keystore.StateCompleted),
		}},
		{"resolve to failed", resolve(keystore.StateFailed, false), map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                refused(errs.Conflict),
			"reserved, lease ran out": moves(keystore.OutcomeFailed, keystore.StateFailed),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       moves(keystore.OutcomeFailed, keystore.StateFailed),
			"failed, final":           moves(keystore.OutcomeFailed, keystore.StateFailed),
			"unknown":                 moves(keystore.OutcomeFailed, keystore.StateFailed),
			"parked":                  moves(keystore.OutcomeFailed, keystore.StateFailed),
			"parked, woken":           moves(keystore.OutcomeFailed, keystore.StateFailed),
		}},
		{"reserve with a resume_url for a paused destination", reserveParking, map[string]want{
			"absent":                  moves(keystore.OutcomeParked, keystore.StateParked),
			"reserved":                answer(keystore.OutcomeInProgress),
			"reserved, lease ran out": moves(keystore.OutcomeStateUnknown, keystore.StateUnknown),
			"completed":               answer(keystore.OutcomeDuplicate),
			"failed, retryable":       moves(keystore.OutcomeParked, keystore.StateParked),
			"failed, final":           answer(keystore.OutcomeRejected),
			"unknown":                 answer(keystore.OutcomeStateUnknown),
			"parked":                  answer(keystore.OutcomeParked),                      // a copy: no second write
			"parked, woken":           moves(keystore.OutcomeParked, keystore.StateParked), // woken too early: parked again
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
			"parked, woken":           accepted(1),
		}},
		{"fail: destination_unreachable with a resume_url", failParking, map[string]want{
			"absent":                  refused(errs.NotFound),
			"reserved":                moves(keystore.OutcomeParked, keystore.StateParked),
			"reserved, lease ran out": moves(keystore.OutcomeParked, keystore.StateParked),
			"completed":               refused(errs.Conflict),
			"failed, retryable":       refused(errs.Conflict),
			"failed, final":           refused(errs.Conflict),
			"unknown":                 moves(keystore.OutcomeParked, keystore.StateParked),
			"parked":                  refused(errs.StaleToken),
			"parked, woken":           refused(errs.StaleToken),
		}},
		{"claim the resume call (catch-up)", claimResume, map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  moves(keystore.OutcomeParked, keystore.StateParked),
			"parked, woken":           nothing, // another guard holds the call
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
			"parked, woken":           moves(keystore.OutcomeParked, keystore.StateParked),
		}},
		{"n8n lost the parked execution", resumeAnswered(keystore.ResumeLost), map[string]want{
			"absent":                  nothing,
			"reserved":                nothing,
			"reserved, lease ran out": nothing,
			"completed":               nothing,
			"failed, retryable":       nothing,
			"failed, final":           nothing,
			"unknown":                 nothing,
			"parked":                  moves(keystore.OutcomeParked, keystore.StateParked),
			"parked, woken":           moves(keystore.OutcomeParked, keystore.StateParked),
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
			"parked, woken":           nothing,
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
			"parked, woken":           nothing,
		}},
	}
	for _, ev := range events {
		if len(ev.want) != len(states) {
			t.Fatalf("%s: %d states listed, want all %d", ev.name, len(ev.want), len(states))
		}
		for _, from := range states {
			w, ok := ev.want[from]
			if !ok {
				t.Fatalf("%s: state %q not listed", ev.name, from)
			}
			t.Run(ev.name+" when "+from, func(t *testing.T) {
				f := fixtures[from](t)
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
		return fixture{s.Record, s.Result.Token}
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
