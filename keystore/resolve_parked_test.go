package keystore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The one rule for resolving a parked key, phase by phase: the rule
// itself (ResolveParked), a single resolution (DecideResolve, what
// /v1/resolve, the CLI, the console and Slack call) and a bulk decision
// (DecideBulkResolve) agree on every phase, and a forced resolution says
// in the key's history that the execution was left waiting in n8n.
func TestOneRuleForResolvingAParkedKey(t *testing.T) {
	approvedWoken := func(t *testing.T) fixture {
		f := approvalStep(t, "approved, woken")
		a, ok := keystore.DecideResumeAnswered(f.cur, nil, *f.cur.ParkedAt, keystore.ResumeAccepted, "", t0)
		if !ok {
			t.Fatal("building the fixture: answer not recorded")
		}
		return fixture{cur: a.Record}
	}
	cases := []struct {
		name    string
		fixture func(t *testing.T) fixture
		waits   bool // its execution waits for the guard's resume call
	}{
		{"parked", fixtures["parked"], true},
		{"parked, claimed", fixtures["parked, claimed"], true},
		{"parked, probe", fixtures["parked, probe"], true},
		{"approved", approvalFixtures["approved"], true},
		{"approved, claimed", approvalFixtures["approved, woken"], true}, // the call may not have been made
		{"parked, resumed", fixtures["parked, resumed"], false},          // the woken execution reserves and finds the decision
		{"approved, resumed", approvedWoken, false},
		{"parked, lost", fixtures["parked, lost"], false},
		{"unknown", fixtures["unknown"], false},
		{"failed, retryable", fixtures["failed, retryable"], false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.fixture(t)
			ns := f.cur.Namespace
			np := keystore.NamespacePolicy{Retention: time.Hour}
			err := keystore.ResolveParked(f.cur, false)
			if c.waits != (errs.CodeOf(err) == errs.ParkedWaiting) {
				t.Fatalf("ResolveParked: %v, want parked_waiting %v", err, c.waits)
			}
			if c.waits && (!strings.Contains(errs.MessageOf(err), "stop the execution in n8n") || !strings.Contains(errs.MessageOf(err), "force")) {
				t.Errorf("the refusal does not say what to do instead: %v", err)
			}
			if err := keystore.ResolveParked(f.cur, true); err != nil {
				t.Fatalf("with force: %v", err)
			}
			for _, res := range []keystore.State{keystore.StateCompleted, keystore.StateFailed} {
				req := keystore.ResolveRequest{Namespace: ns, Key: f.cur.Key, Resolution: res, By: "ann", Note: "checked"}
				_, err := keystore.DecideResolve(f.cur, req, np, now)
				if c.waits != (errs.CodeOf(err) == errs.ParkedWaiting) || !c.waits && err != nil {
					t.Fatalf("resolve %s: %v, want parked_waiting %v", res, err, c.waits)
				}
				req.Force = true
				st, err := keystore.DecideResolve(f.cur, req, np, now)
				if err != nil {
					t.Fatalf("resolve %s with force: %v", res, err)
				}
				last := keystore.LastTransition(st.Record)
				if left := strings.Contains(last.Detail, "left waiting in n8n"); left != c.waits {
					t.Errorf("resolve %s with force: history %q, want it to say the execution was left waiting: %v", res, last.Detail, c.waits)
				}
			}
			bulk, err := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: ns}, Resolution: keystore.StateFailed, By: "ann", Note: "incident", ID: "b-00000009"}.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			_, skip, err := keystore.DecideBulkResolve(f.cur, bulk, np, now)
			if err != nil || (skip == keystore.SkipParkedWaiting) != c.waits {
				t.Fatalf("bulk: skip %q err %v, want parked_waiting %v", skip, err, c.waits)
			}
		})
	}
}
