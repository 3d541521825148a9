// Package storetest is the conformance suite every keystore.Store must
// pass. A backend's test calls Run with a constructor; the cases are named
// after the seed matrix (first event, sequential repeat, two copies at
// once, ...), so a failure reads as the user-visible behaviour that broke.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Opener returns a Store on the data of one test. Calling it again after
// Close must give a store on the same data (a restart).
type Opener func() keystore.Store

// New prepares empty data for one test and returns its opener.
type New func(t *testing.T, clock keystore.Clock, pol keystore.Policies) Opener

// Clock is the tests' one fake clock (internal/fakeclock), under the
// name the cases know it by.
type Clock = fakeclock.Clock

// NewClock starts a clock at fakeclock.Start, a fixed, millisecond-aligned
// instant.
func NewClock() *Clock { return fakeclock.New() }

// env is one test's store and clock.
type env struct {
	t     *testing.T
	clock *Clock
	open  Opener
	s     keystore.Store
	ctx   context.Context
}

func setup(t *testing.T, newStore New, pol keystore.Policies) *env {
	t.Helper()
	c := NewClock()
	open := newStore(t, c.Now, pol)
	e := &env{t: t, clock: c, open: open, s: open(), ctx: context.Background()}
	t.Cleanup(func() { e.s.Close() })
	return e
}

func (e *env) restart() {
	e.t.Helper()
	if err := e.s.Close(); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	e.s = e.open()
}

func (e *env) reserve(ns, key string, mod ...func(*keystore.ReserveRequest)) keystore.Result {
	e.t.Helper()
	req := keystore.ReserveRequest{Namespace: ns, Key: key, Owner: "n8n exec 4711"}
	for _, m := range mod {
		m(&req)
	}
	r, err := e.s.Reserve(e.ctx, req)
	if err != nil {
		e.t.Fatalf("reserve %s/%s: %v", ns, key, err)
	}
	return r
}

func (e *env) complete(ns, key, token, ref string) keystore.Result {
	e.t.Helper()
	r, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: key, Token: token, ResultRef: ref})
	if err != nil {
		e.t.Fatalf("complete %s/%s: %v", ns, key, err)
	}
	return r
}

func (e *env) fail(ns, key, token string, reason keystore.Reason) keystore.Result {
	e.t.Helper()
	r, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: token, Reason: reason, Message: "HTTP 503 from CRM"})
	if err != nil {
		e.t.Fatalf("fail %s/%s: %v", ns, key, err)
	}
	return r
}

func (e *env) lookup(ns, key string) keystore.Result {
	e.t.Helper()
	r, err := e.s.Lookup(e.ctx, ns, key)
	if err != nil {
		e.t.Fatalf("lookup %s/%s: %v", ns, key, err)
	}
	return r
}

func (e *env) events() []keystore.Event {
	e.t.Helper()
	evs, err := e.s.Events(e.ctx, 0, 1000)
	if err != nil {
		e.t.Fatalf("events: %v", err)
	}
	return evs
}

func wantOutcome(t *testing.T, r keystore.Result, want keystore.Outcome) {
	t.Helper()
	if r.Outcome != want {
		state := keystore.State("absent")
		if r.Record != nil {
			state = r.Record.State
		}
		t.Fatalf("outcome = %s (state %s), want %s", r.Outcome, state, want)
	}
}

func wantCode(t *testing.T, err error, want errs.Code) {
	t.Helper()
	var de *errs.Error
	if !errors.As(err, &de) {
		t.Fatalf("error = %v, want a domain error with code %s", err, want)
	}
	if de.Code != want {
		t.Fatalf("code = %s (%s), want %s", de.Code, de.Message, want)
	}
}

// wantField checks the code and that the error names field and rule.
func wantField(t *testing.T, err error, want errs.Code, field, rule string) {
	t.Helper()
	wantCode(t, err, want)
	var de *errs.Error
	errors.As(err, &de)
	for _, f := range de.Fields {
		if f.Field == field && f.Rule == rule {
			return
		}
	}
	t.Fatalf("fields %+v (%s), want %s %s", de.Fields, de.Message, field, rule)
}

func wantState(t *testing.T, r keystore.Result, want keystore.State) {
	t.Helper()
	if r.Record == nil {
		if want == keystore.StateAbsent {
			return
		}
		t.Fatalf("no record, want state %s", want)
	}
	if r.Record.State != want {
		t.Fatalf("state = %s, want %s", r.Record.State, want)
	}
}

func sameRecord(t *testing.T, a, b *keystore.Record) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("record changed:\nbefore %s\nafter  %s", ja, jb)
	}
}

// Run runs the whole suite.
func Run(t *testing.T, newStore New) {
	t.Run("transitions", func(t *testing.T) { runTransitions(t, newStore) })
	t.Run("fingerprints", func(t *testing.T) { runFingerprints(t, newStore) })
	t.Run("leases", func(t *testing.T) { runLeases(t, newStore) })
	t.Run("resolve", func(t *testing.T) { runResolve(t, newStore) })
	t.Run("listings", func(t *testing.T) { runListings(t, newStore) })
	t.Run("retention", func(t *testing.T) { runRetention(t, newStore) })
	t.Run("breakers", func(t *testing.T) { runBreakers(t, newStore) })
	t.Run("breakers per namespace", func(t *testing.T) { runBreakerViews(t, newStore) })
	t.Run("concurrency", func(t *testing.T) { runConcurrency(t, newStore) })
	t.Run("races on existing keys", func(t *testing.T) { runRacesOnExistingKeys(t, newStore) })
	t.Run("restart", func(t *testing.T) { runRestart(t, newStore) })
	t.Run("clock steps back", func(t *testing.T) { runClockStepsBack(t, newStore) })
	t.Run("edge cases", func(t *testing.T) { runEdgeCases(t, newStore) })
	t.Run("repeated requests", func(t *testing.T) { runRepeats(t, newStore) })
	t.Run("console", func(t *testing.T) { runConsole(t, newStore) })
	t.Run("stages", func(t *testing.T) { runStages(t, newStore) })
	t.Run("audit", func(t *testing.T) { runAudit(t, newStore) })
	t.Run("audit of decisions on failed executions", func(t *testing.T) { runFailureDecisions(t, newStore) })
	t.Run("parking", func(t *testing.T) { runParking(t, newStore) })
	t.Run("parked phases", func(t *testing.T) { runPhases(t, newStore) })
	t.Run("parked keys by wait", func(t *testing.T) { runWaits(t, newStore) })
	t.Run("resume pace", func(t *testing.T) { runPace(t, newStore) })
	t.Run("checks", func(t *testing.T) { runChecks(t, newStore) })
	t.Run("approval", func(t *testing.T) { runApproval(t, newStore) })
	t.Run("bulk", func(t *testing.T) { runBulk(t, newStore) })
	t.Run("acknowledgements", func(t *testing.T) { runAcks(t, newStore) })
	t.Run("summary", func(t *testing.T) { runSummary(t, newStore) })
	t.Run("commit signal", func(t *testing.T) { runCommits(t, newStore) })
	t.Run("re-runs", func(t *testing.T) { runReruns(t, newStore) })
	t.Run("caught up", func(t *testing.T) { runCaughtUp(t, newStore) })
}
