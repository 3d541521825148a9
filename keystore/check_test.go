package keystore_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Checks (check.go), transition by transition: every state a key can be
// in, and the states of a key whose page waits for its check, against the
// check's events and against the events that may come meanwhile.

// withCheck is a namespace that names a check.
var withCheck = func() keystore.NamespacePolicy {
	np := toUnk
	np.Check = "crm-lookup"
	return np
}()

func heldFor(t *testing.T, resume string) fixture {
	f := reserved(t, time.Minute)
	s := must(t)(keystore.DecideFail(f.cur, nil, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_1", Token: f.token,
		Reason: keystore.ReasonOutcomeUnknown, Message: "timeout", ResumeURL: resume}, withCheck, keystore.DestinationPolicy{}, t0))
	if s.Record.Check == nil || len(s.Events) != 0 {
		t.Fatalf("building the fixture: not held for the check: %+v", s)
	}
	return fixture{cur: s.Record, token: f.token}
}

func claimedCheck(t *testing.T, claims int) fixture {
	f := heldFor(t, "")
	for i := 0; i < claims; i++ {
		s, c := keystore.DecideClaimCheck(f.cur, 1, time.Second, keystore.DefaultCheckClaims, t0.Add(time.Duration(i-claims)*time.Minute))
		if c != keystore.CheckClaimed {
			t.Fatalf("building the fixture: claim %d refused", i+1)
		}
		f.cur = s.Record
	}
	return f
}

var checkFixtures = map[string]func(t *testing.T) fixture{
	"unknown, held for its check":        func(t *testing.T) fixture { return heldFor(t, "") },
	"unknown, held, its execution waits": func(t *testing.T) fixture { return heldFor(t, resumeURL) },
	"unknown, check claimed by a guard": func(t *testing.T) fixture {
		f := claimedCheck(t, 1)
		f.cur.Check.ClaimUntil = ptr(now.Add(time.Minute))
		return f
	},
	"unknown, held, its claims used up":       func(t *testing.T) fixture { return claimedCheck(t, keystore.DefaultCheckClaims) },
	"unknown, held, a claim lapsed (a crash)": func(t *testing.T) fixture { return claimedCheck(t, 1) },
}

var checkStates = append(slices.Clone(states), "unknown, held for its check", "unknown, held, its execution waits",
	"unknown, check claimed by a guard", "unknown, held, its claims used up", "unknown, held, a claim lapsed (a crash)")

func claimCheck(f fixture) (keystore.Step, error) {
	s, _ := keystore.DecideClaimCheck(f.cur, 1, time.Minute, keystore.DefaultCheckClaims, now)
	return s, nil
}

// extendCheckClaim and releaseCheckClaim name the claim of the fixture
// "unknown, check claimed by a guard" (until now+1 min); any other is
// not the holder's.
func extendCheckClaim(f fixture) (keystore.Step, error) {
	s, _ := keystore.DecideExtendCheckClaim(f.cur, 1, now.Add(time.Minute), 2*time.Minute, now)
	return s, nil
}

func releaseCheckClaim(f fixture) (keystore.Step, error) {
	s, _ := keystore.DecideReleaseCheckClaim(f.cur, 1, now.Add(time.Minute), now)
	return s, nil
}

func checkAnswered(attempt int, a keystore.CheckAnswer) event {
	return func(f fixture) (keystore.Step, error) {
		s, ok := keystore.DecideCheckAnswered(f.cur, attempt, a, withCheck, now)
		if !ok && (s.Record != nil || len(s.Events) > 0) {
			panic("DecideCheckAnswered: a step without ok")
		}
		return s, nil
	}
}

func failIn(np keystore.NamespacePolicy, reason keystore.Reason) event {
	return func(f fixture) (keystore.Step, error) {
		return keystore.DecideFail(f.cur, nil, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_1", Token: f.token, Reason: reason}, np, keystore.DestinationPolicy{}, now)
	}
}

// cw is the machine's answer here: the state written ("" none), the
// events, whether the key still waits for its check, or a refusal.
type cw struct {
	state   keystore.State
	events  []keystore.EventKind
	held    bool
	refused errs.Code
}

var (
	none      = cw{}
	pagedNow  = cw{state: keystore.StateUnknown, events: []keystore.EventKind{keystore.EventKeyUnknown}}
	stillHeld = cw{state: keystore.StateUnknown, held: true}
	resolved  = func(s keystore.State) cw {
		return cw{state: s, events: []keystore.EventKind{keystore.EventKeyResolved}}
	}
	conflict = cw{refused: errs.Conflict}
)

// held states of checkStates, in order, with the same answer.
func heldAll(w cw) map[string]cw {
	return map[string]cw{"unknown, held for its check": w, "unknown, held, its execution waits": w,
		"unknown, check claimed by a guard": w, "unknown, held, its claims used up": w, "unknown, held, a claim lapsed (a crash)": w}
}

func TestCheckTransitions(t *testing.T) {
	found := keystore.CheckAnswer{Result: keystore.CheckFound, Reference: "crm-77", Workflow: "lead check", Execution: "4711"}
	absent := keystore.CheckAnswer{Result: keystore.CheckAbsent, Workflow: "lead check", Execution: "4712"}
	events := []struct {
		name string
		do   event
		want map[string]cw // states not listed: nothing written
	}{
		{"fail: outcome_unknown where a check is named", failIn(withCheck, keystore.ReasonOutcomeUnknown), merge(map[string]cw{
			"absent": {refused: errs.NotFound}, "completed": conflict, "failed, retryable": conflict, "failed, final": conflict,
			"reserved": stillHeld, "reserved, lease ran out": stillHeld,
			"parked": {refused: errs.StaleToken}, "parked, claimed": {refused: errs.StaleToken},
		}, nil)},
		{"fail: outcome_unknown where none is", failIn(toUnk, keystore.ReasonOutcomeUnknown), merge(map[string]cw{
			"absent": {refused: errs.NotFound}, "completed": conflict, "failed, retryable": conflict, "failed, final": conflict,
			"reserved": pagedNow, "reserved, lease ran out": pagedNow,
			"parked": {refused: errs.StaleToken}, "parked, claimed": {refused: errs.StaleToken},
		}, nil)},
		{"reserve after the lease ran out, where a check is named", reserveWith(fpA, nil, withCheck), map[string]cw{
			"reserved, lease ran out": stillHeld,
			"absent":                  {state: keystore.StateReserved}, "failed, retryable": {state: keystore.StateReserved},
			"parked": {state: keystore.StateReserved}, "parked, claimed": {state: keystore.StateReserved},
		}},
		{"lease expiry (the sweeper), where a check is named", leaseExpiry(withCheck), map[string]cw{"reserved, lease ran out": stillHeld}},
		{"claim the check", claimCheck, map[string]cw{
			"unknown, held for its check":             stillHeld,
			"unknown, held, its execution waits":      stillHeld,
			"unknown, held, a claim lapsed (a crash)": stillHeld,
			"unknown, held, its claims used up":       pagedNow, // the person is paged after all
			// claimed by a guard: refused, nothing written
		}},
		{"its holder extends the check's claim", extendCheckClaim, map[string]cw{"unknown, check claimed by a guard": stillHeld}},
		{"its holder hands the check's claim back", releaseCheckClaim, map[string]cw{"unknown, check claimed by a guard": stillHeld}},
		{"the check found the record", checkAnswered(1, found), heldAll(resolved(keystore.StateCompleted))},
		{"the check found nothing", checkAnswered(1, absent), merge(heldAll(resolved(keystore.StateFailed)), map[string]cw{
			"unknown, held, its execution waits": resolved(keystore.StateParked), // the catch-up resumes it
		})},
		{"found without a reference", checkAnswered(1, keystore.CheckAnswer{Result: keystore.CheckFound}), heldAll(pagedNow)},
		{"the check gave no usable answer", checkAnswered(1, keystore.CheckAnswer{Result: keystore.CheckFailed, Detail: "500"}), heldAll(pagedNow)},
		{"an answer about another attempt", checkAnswered(2, found), nil},
		{"complete (a late confirmation by the holder)", complete(currentToken), merge(heldAll(cw{state: keystore.StateCompleted}), map[string]cw{
			"absent": {refused: errs.NotFound}, "reserved": {state: keystore.StateCompleted}, "reserved, lease ran out": {state: keystore.StateCompleted},
			"unknown": {state: keystore.StateCompleted}, "failed, retryable": conflict, "failed, final": conflict,
			"parked": {refused: errs.StaleToken}, "parked, claimed": {refused: errs.StaleToken},
		})},
		{"a person resolves (the check is pending)", resolve(keystore.StateFailed, false), merge(heldAll(resolved(keystore.StateFailed)), map[string]cw{
			"absent": {refused: errs.NotFound}, "reserved": conflict, "completed": conflict,
			"reserved, lease ran out": resolved(keystore.StateFailed), "unknown": resolved(keystore.StateFailed),
			"failed, retryable": resolved(keystore.StateFailed), "failed, final": resolved(keystore.StateFailed),
			// Its execution waits for the guard's resume call: the one
			// rule for parked keys refuses (resolve_parked.go).
			"parked": {refused: errs.ParkedWaiting}, "parked, claimed": {refused: errs.ParkedWaiting},
		})},
	}
	for _, ev := range events {
		for _, from := range checkStates {
			w := ev.want[from]
			t.Run(ev.name+" when "+from, func(t *testing.T) {
				mk := fixtures[from]
				if mk == nil {
					mk = checkFixtures[from]
				}
				f := mk(t)
				before := f.cur.Clone()
				s, err := ev.do(f)
				if !reflect.DeepEqual(before, f.cur) {
					t.Fatalf("the decision changed its input record")
				}
				if w.refused != "" {
					if errs.CodeOf(err) != w.refused {
						t.Fatalf("want refusal %s, got %v", w.refused, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if w.state == "" {
					if s.Record != nil || len(s.Events) > 0 {
						t.Fatalf("wrote %+v, events %+v; want nothing written", s.Record, s.Events)
					}
					return
				}
				if s.Record == nil || s.Record.State != w.state {
					t.Fatalf("wrote %+v, want state %s", s.Record, w.state)
				}
				var kinds []keystore.EventKind
				for _, e := range s.Events {
					kinds = append(kinds, e.Kind)
				}
				if !slices.Equal(kinds, w.events) {
					t.Errorf("events %v, want %v", kinds, w.events)
				}
				if (s.Record.Check != nil) != w.held {
					t.Errorf("held for the check: %v, want %v", s.Record.Check != nil, w.held)
				}
				if s.Record.State != keystore.StateUnknown && s.Record.Check != nil {
					t.Errorf("a %s key still waits for a check", s.Record.State)
				}
			})
		}
	}
}

func merge(a, b map[string]cw) map[string]cw {
	out := map[string]cw{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// What the check decided is the key's history, made by the check, with
// the workflow and execution that answered; and the page comes with the
// reason the key went unknown.
func TestCheckDecisionsAreInTheHistory(t *testing.T) {
	f := heldFor(t, "")
	s, ok := keystore.DecideCheckAnswered(f.cur, 1, keystore.CheckAnswer{Result: keystore.CheckFound, Reference: "crm-77", Workflow: "lead check", Execution: "4711"}, withCheck, now)
	if !ok {
		t.Fatal("the answer was ignored")
	}
	r := s.Record
	h := r.History[len(r.History)-1]
	if r.ResultRef != "crm-77" || h.Event != keystore.HistoryChecked || h.By != "check:crm-lookup" ||
		h.Detail != "found crm-77 (workflow lead check, execution 4711)" || r.ResolvedBy != "check:crm-lookup" {
		t.Fatalf("record %+v, last history %+v", r, h)
	}
	if ev := s.Events[0]; ev.Owner != "check:crm-lookup" || ev.Message != "completed" || ev.Attempt != 1 {
		t.Fatalf("key_resolved %+v", ev)
	}
	s, _ = keystore.DecideCheckAnswered(f.cur, 1, keystore.CheckAnswer{Result: keystore.CheckFailed, Detail: "the check answered 500"}, withCheck, now)
	if ev := s.Events[0]; ev.Kind != keystore.EventKeyUnknown || ev.Reason != keystore.ReasonOutcomeUnknown || ev.Message != "timeout" || ev.Owner != "wf-1" {
		t.Fatalf("the page %+v", ev)
	}
	if h := s.Record.History[len(s.Record.History)-1]; h.Event != keystore.HistoryCheckFailed || h.Detail != "the check answered 500" {
		t.Fatalf("history %+v", h)
	}
}

// A destination's check serves the namespaces that name none.
func TestCheckOfTheDestination(t *testing.T) {
	p := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"own": {Check: "own-check"}},
		Destinations: map[string]keystore.DestinationPolicy{"crm": {Check: "crm-check"}}}
	for _, c := range []struct{ ns, dest, want string }{{"own", "crm", "own-check"}, {"other", "crm", "crm-check"}, {"other", "", ""}, {"other", "mail", ""}} {
		if got := p.CheckFor(c.ns, c.dest); got != c.want {
			t.Errorf("CheckFor(%s, %s) = %q, want %q", c.ns, c.dest, got, c.want)
		}
	}
	s := must(t)(keystore.DecideReserve(nil, keystore.NewBreaker("crm"), keystore.ReserveRequest{Namespace: "other", Key: "k", Owner: "wf", Destination: "crm", Lease: time.Second}, fpA, p.Namespace("other"), t0))
	s = must(t)(keystore.DecideReserve(s.Record, keystore.NewBreaker("crm"), keystore.ReserveRequest{Namespace: "other", Key: "k", Owner: "wf", Destination: "crm"}, fpA, p.Namespace("other"), now))
	if s.Record.Check == nil || s.Record.Check.Check != "crm-check" || len(s.Events) != 0 {
		t.Fatalf("not held for the destination's check: %+v", s)
	}
}
