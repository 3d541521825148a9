package storetest

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// claimed is ClaimRerunHeld's answer without the claim's time, for the
// cases that ask only which guard won the claim.
func claimed(_ time.Time, ok bool, err error) (bool, error) { return ok, err }

// Re-runs (keystore/rerun.go): a gate's reserve is refused until a person
// allows the re-run, the refusal records where the execution waits, the
// grant survives a restart, and of the re-run and any copy exactly one
// reserve starts an attempt.
func runReruns(t *testing.T, newStore New) {
	const exec42 = "n8n wf1 exec 42"
	gate := func(owner string) func(*keystore.ReserveRequest) {
		return func(r *keystore.ReserveRequest) { r.Rerun, r.Owner = true, owner }
	}
	failedAtGate := func(e *env, key string) {
		t.Helper()
		r := e.reserve(ns, key, func(r *keystore.ReserveRequest) { r.Owner = exec42 })
		e.fail(ns, key, r.Token, keystore.ReasonDestinationFailed)
		wantOutcome(t, e.reserve(ns, key, gate(exec42)), keystore.OutcomeRerunNotGranted)
	}
	grant := func(e *env, key string) (keystore.Result, error) {
		return e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "CRM is back"})
	}

	t.Run("the gate is refused until a person allows the re-run; then one reserve of the re-run and its copies wins", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		failedAtGate(e, "evt_rr")
		// The same execution at its gate again (n8n's own retry without a
		// grant): refused again, and the history is not written twice.
		before := e.lookup(ns, "evt_rr").Record
		wantOutcome(t, e.reserve(ns, "evt_rr", gate(exec42)), keystore.OutcomeRerunNotGranted)
		sameRecord(t, before, e.lookup(ns, "evt_rr").Record)
		if got := keystore.RerunHolder(before); got != exec42 {
			t.Fatalf("RerunHolder = %q, want %q (history %+v)", got, exec42, before.History)
		}
		res, err := grant(e, "evt_rr")
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, res, keystore.OutcomeFailed)
		e.restart()
		rec := e.lookup(ns, "evt_rr").Record
		if holder, ok := keystore.RerunGranted(rec); !ok || holder != exec42 || rec.State != keystore.StateFailed || !rec.Retryable {
			t.Fatalf("after the grant and a restart: granted %v holder %q state %s retryable %v", ok, holder, rec.State, rec.Retryable)
		}
		// A second click: the same answer, nothing written.
		res, err = grant(e, "evt_rr")
		if err != nil || !res.Replayed {
			t.Fatalf("second grant: %+v %v, want a replay", res, err)
		}
		sameRecord(t, rec, e.lookup(ns, "evt_rr").Record)
		// One guard claims the re-run; another (a replica) does not, until
		// the claim is stale.
		if ok, err := claimed(e.s.ClaimRerunHeld(e.ctx, ns, "evt_rr", "guard-a", time.Minute, 10*time.Minute)); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if ok, err := claimed(e.s.ClaimRerunHeld(e.ctx, ns, "evt_rr", "guard-b", time.Minute, 10*time.Minute)); err != nil || ok {
			t.Fatalf("a second claim in flight: %v %v, want refused", ok, err)
		}
		e.clock.Advance(time.Minute)
		if ok, err := claimed(e.s.ClaimRerunHeld(e.ctx, ns, "evt_rr", "guard-b", time.Minute, 10*time.Minute)); err != nil || !ok {
			t.Fatalf("a claim of a stale claim: %v %v", ok, err)
		}
		if ok, err := e.s.NoteRerun(e.ctx, ns, "evt_rr", keystore.HistoryRerunStarted, "57"); err != nil || !ok {
			t.Fatalf("note started: %v %v", ok, err)
		}
		if ok, err := claimed(e.s.ClaimRerunHeld(e.ctx, ns, "evt_rr", "guard-a", time.Minute, 10*time.Minute)); err != nil || ok {
			t.Fatalf("a claim of a re-run started a minute ago: %v %v, want refused", ok, err)
		}
		if got := keystore.RerunStartedAs(e.lookup(ns, "evt_rr").Record); got != "57" {
			t.Fatalf("RerunStartedAs = %q", got)
		}
		// The re-run's gate and two copies at once: exactly one attempt.
		n := e.raceReserves(t, []keystore.ReserveRequest{
			{Namespace: ns, Key: "evt_rr", Owner: "n8n wf1 exec 57", Rerun: true},
			{Namespace: ns, Key: "evt_rr", Owner: "copy a"},
			{Namespace: ns, Key: "evt_rr", Owner: "copy b"},
		})
		if n != 1 {
			t.Fatalf("%d reserves accepted, want exactly 1", n)
		}
		rec = e.lookup(ns, "evt_rr").Record
		if rec.State != keystore.StateReserved || rec.Attempt != 2 {
			t.Fatalf("after the re-run: state %s attempt %d", rec.State, rec.Attempt)
		}
		// The grant is taken: a late note of n8n's answer writes nothing.
		if ok, err := e.s.NoteRerun(e.ctx, ns, "evt_rr", keystore.HistoryRerunRefused, "late"); err != nil || ok {
			t.Fatalf("note after the grant was taken: %v %v", ok, err)
		}
	})

	t.Run("a grant needs a key waiting at its gate; refused grants write nothing", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_nogate")
		e.fail(ns, "evt_nogate", r.Token, keystore.ReasonDestinationFailed)
		before := e.lookup(ns, "evt_nogate").Record
		_, err := grant(e, "evt_nogate")
		wantCode(t, err, errs.Conflict)
		sameRecord(t, before, e.lookup(ns, "evt_nogate").Record)
		// Final, or completed: not a re-run.
		_, err = e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_nogate", Resolution: keystore.StateFailed, Final: true, Rerun: true, By: "Ana", Note: "x"})
		wantField(t, err, errs.InvalidRequest, "rerun", "resolution=failed,final=false")
		_, err = e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_nogate", Resolution: keystore.StateCompleted, Rerun: true, By: "Ana", Note: "x"})
		wantField(t, err, errs.InvalidRequest, "rerun", "resolution=failed,final=false")
		sameRecord(t, before, e.lookup(ns, "evt_nogate").Record)
		// A gate's reserve of a completed or absent key answers as any reserve.
		r = e.reserve(ns, "evt_done")
		e.complete(ns, "evt_done", r.Token, "crm-1")
		wantOutcome(t, e.reserve(ns, "evt_done", gate(exec42)), keystore.OutcomeDuplicate)
		wantOutcome(t, e.reserve(ns, "evt_new", gate(exec42)), keystore.OutcomeAccepted)
	})

	t.Run("a key at its gate is written only after a grant, whichever reserve reaches it", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		failedAtGate(e, "evt_start")
		before := e.lookup(ns, "evt_start").Record
		// n8n runs the gated execution again from its start (its API's
		// Retry while the gate's Retry On Fail keeps it running), and the
		// source sends a copy: neither writes, and nothing is recorded.
		for _, owner := range []string{exec42, "n8n wf1 exec 58", "webhook"} {
			wantOutcome(t, e.reserve(ns, "evt_start", func(r *keystore.ReserveRequest) { r.Owner = owner }), keystore.OutcomeRerunNotGranted)
		}
		sameRecord(t, before, e.lookup(ns, "evt_start").Record)
		if _, err := grant(e, "evt_start"); err != nil {
			t.Fatal(err)
		}
		// After the grant the first of them writes, once.
		n := e.raceReserves(t, []keystore.ReserveRequest{
			{Namespace: ns, Key: "evt_start", Owner: "n8n wf1 exec 58"},
			{Namespace: ns, Key: "evt_start", Owner: "webhook"},
		})
		if n != 1 {
			t.Fatalf("%d reserves accepted after the grant, want exactly 1", n)
		}
	})

	t.Run("a plain allow of a retry lets the gate through: a person's Retry in n8n is the next copy", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		failedAtGate(e, "evt_plain")
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_plain", Resolution: keystore.StateFailed, By: "Ana", Note: "CRM back"}); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, e.reserve(ns, "evt_plain", gate("n8n wf1 exec 43")), keystore.OutcomeAccepted)
	})

	t.Run("n8n's refusal is noted and the execution may be re-run again", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		failedAtGate(e, "evt_ref")
		if ok, err := claimed(e.s.ClaimRerunHeld(e.ctx, ns, "evt_ref", "guard-a", time.Minute, time.Minute)); err != nil || ok {
			t.Fatalf("claim before a grant: %v %v, want nothing written", ok, err)
		}
		if _, err := grant(e, "evt_ref"); err != nil {
			t.Fatal(err)
		}
		if ok, err := e.s.NoteRerun(e.ctx, ns, "evt_ref", keystore.HistoryRerunStarted, "57"); err != nil || ok {
			t.Fatalf("note started without a claim: %v %v, want nothing written", ok, err)
		}
		if ok, err := e.s.NoteRerun(e.ctx, ns, "evt_ref", keystore.HistoryRerunRefused, "n8n refused the re-run: HTTP 404 gone"); err != nil || !ok {
			t.Fatalf("note refused: %v %v", ok, err)
		}
		// The person who allowed it hears of the refusal: one event, with
		// the refusal's words, written with the history entry.
		var refused []keystore.Event
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventRerunRefused && ev.Key == "evt_ref" {
				refused = append(refused, ev)
			}
		}
		if len(refused) != 1 || refused[0].Namespace != ns || refused[0].Message != "n8n refused the re-run: HTTP 404 gone" || refused[0].Owner != "Ana" || refused[0].Attempt == 0 {
			t.Fatalf("events of the refusal: %+v, want one rerun_refused naming the key, its attempt, who allowed it and why", refused)
		}
		rec := e.lookup(ns, "evt_ref").Record
		if _, granted := keystore.RerunGranted(rec); granted || keystore.RerunHolder(rec) != exec42 {
			t.Fatalf("after n8n refused: granted %v holder %q", granted, keystore.RerunHolder(rec))
		}
		// The gate still refuses, and a person may allow it again.
		wantOutcome(t, e.reserve(ns, "evt_ref", gate(exec42)), keystore.OutcomeRerunNotGranted)
		if res, err := grant(e, "evt_ref"); err != nil || res.Replayed {
			t.Fatalf("grant after a refusal: %+v %v", res, err)
		}
	})

	t.Run("a bulk re-run grants the keys at a gate and skips the others", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		failedAtGate(e, "evt_b1")
		failedAtGate(e, "evt_b2")
		r := e.reserve(ns, "evt_b3")
		e.fail(ns, "evt_b3", r.Token, keystore.ReasonDestinationFailed)
		req := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: ns, States: []keystore.State{keystore.StateFailed}},
			Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "CRM is back"}
		res := e.bulk(req)
		if res.Decided != 2 || res.Skipped[keystore.SkipNoRerunGate] != 1 {
			t.Fatalf("bulk re-run: %+v", res)
		}
		for _, k := range []string{"evt_b1", "evt_b2"} {
			if _, ok := keystore.RerunGranted(e.lookup(ns, k).Record); !ok {
				t.Fatalf("%s not granted", k)
			}
		}
		// The same bulk again decides nothing.
		req.ID = res.ID
		if again := e.bulk(req); again.Decided != 0 {
			t.Fatalf("the bulk again: %+v", again)
		}
		// The audit's words: the bulk re-ran the executions.
		kept, err := e.s.BulkActions(e.ctx, []string{res.ID})
		if a, ok := kept[res.ID]; err != nil || !ok || !a.Rerun || a.By != "Ana" {
			t.Fatalf("the kept bulk %s: %+v %v, want it to say it re-ran the executions", res.ID, a, err)
		}
	})

	runRerunClaims(t, newStore)
}

// A re-run's claim (keystore/rerun.go): kept by its holder while n8n is
// asked, it never lapses, so no second guard claims it; handed back when
// n8n was not asked, the key is claimable at once; a claim is named by
// its holder and its time, through a restart.
func runRerunClaims(t *testing.T, newStore New) {
	const exec42 = "n8n wf1 exec 42"
	atGateGranted := func(e *env, key string) {
		t.Helper()
		r := e.reserve(ns, key, func(r *keystore.ReserveRequest) { r.Owner = exec42 })
		e.fail(ns, key, r.Token, keystore.ReasonDestinationFailed)
		wantOutcome(t, e.reserve(ns, key, func(r *keystore.ReserveRequest) { r.Rerun, r.Owner = true, exec42 }), keystore.OutcomeRerunNotGranted)
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "CRM is back"}); err != nil {
			t.Fatal(err)
		}
	}
	const claim, started = time.Minute, 10 * time.Minute
	claimBy := func(e *env, key, by string) (time.Time, bool) {
		t.Helper()
		at, ok, err := e.s.ClaimRerunHeld(e.ctx, ns, key, by, claim, started)
		if err != nil {
			t.Fatal(err)
		}
		return at, ok
	}

	t.Run("a kept claim never lapses; a claim is named by its holder and its time", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		atGateGranted(e, "evt_keep")
		at, ok := claimBy(e, "evt_keep", "guard-a")
		if !ok || at.IsZero() {
			t.Fatalf("claim: %v at %v", ok, at)
		}
		before := e.lookup(ns, "evt_keep").Record
		for _, c := range []struct {
			by string
			at time.Time
		}{{"guard-b", at}, {"guard-a", at.Add(-time.Second)}} {
			if _, ok, err := e.s.ExtendRerunClaim(e.ctx, ns, "evt_keep", c.by, c.at); err != nil || ok {
				t.Fatalf("extend by %s of %v: %v %v, want refused", c.by, c.at, ok, err)
			}
			if ok, err := e.s.ReleaseRerunClaim(e.ctx, ns, "evt_keep", c.by, c.at); err != nil || ok {
				t.Fatalf("release by %s of %v: %v %v, want refused", c.by, c.at, ok, err)
			}
		}
		sameRecord(t, before, e.lookup(ns, "evt_keep").Record)
		held := at
		for range 3 { // three claims' time, each extended at its middle
			e.clock.Advance(claim / 2)
			next, ok, err := e.s.ExtendRerunClaim(e.ctx, ns, "evt_keep", "guard-a", held)
			if err != nil || !ok || !next.After(held) {
				t.Fatalf("extend of %v: %v %v %v", held, next, ok, err)
			}
			held = next
			if _, ok := claimBy(e, "evt_keep", "guard-b"); ok {
				t.Fatal("a second guard claimed a kept claim")
			}
		}
		if _, ok, err := e.s.ExtendRerunClaim(e.ctx, ns, "evt_keep", "guard-a", at); err != nil || ok {
			t.Fatalf("extend of the claim's first time: %v %v, want refused (it was extended)", ok, err)
		}
		e.restart()
		if _, ok, err := e.s.ExtendRerunClaim(e.ctx, ns, "evt_keep", "guard-a", held); err != nil || !ok {
			t.Fatalf("extend after a restart: %v %v", ok, err)
		}
		// n8n answered: nothing left to keep or hand back.
		if ok, err := e.s.NoteRerun(e.ctx, ns, "evt_keep", keystore.HistoryRerunStarted, "57"); err != nil || !ok {
			t.Fatalf("note: %v %v", ok, err)
		}
		noted := e.lookup(ns, "evt_keep").Record
		at = keystore.LastTransition(noted).At
		if _, ok, err := e.s.ExtendRerunClaim(e.ctx, ns, "evt_keep", "guard-a", held); err != nil || ok {
			t.Fatalf("extend after n8n's answer: %v %v, want refused", ok, err)
		}
		if ok, err := e.s.ReleaseRerunClaim(e.ctx, ns, "evt_keep", "guard-a", held); err != nil || ok {
			t.Fatalf("release after n8n's answer: %v %v, want refused", ok, err)
		}
		sameRecord(t, noted, e.lookup(ns, "evt_keep").Record)
	})

	t.Run("a claim handed back leaves the key claimable at once", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		atGateGranted(e, "evt_back")
		granted := e.lookup(ns, "evt_back").Record
		at, ok := claimBy(e, "evt_back", "guard-a")
		if !ok {
			t.Fatal("claim refused")
		}
		if ok, err := e.s.ReleaseRerunClaim(e.ctx, ns, "evt_back", "guard-a", at); err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
		back := e.lookup(ns, "evt_back").Record
		if back.Stage != keystore.StageGranted || keystore.LastTransition(back).Event != keystore.HistoryRerunGranted || len(back.History) != len(granted.History) {
			t.Fatalf("after the hand-back: stage %q, history %+v; want granted as before the claim", back.Stage, back.History)
		}
		if ok, err := e.s.ReleaseRerunClaim(e.ctx, ns, "evt_back", "guard-a", at); err != nil || ok {
			t.Fatalf("a second hand-back: %v %v, want refused", ok, err)
		}
		if _, ok := claimBy(e, "evt_back", "guard-b"); !ok {
			t.Fatal("the key was not claimable at once after the hand-back")
		}
		// A started re-run that never reserved the key, claimed again
		// and handed back: started and stale again, claimable at once.
		atGateGranted(e, "evt_again")
		at, _ = claimBy(e, "evt_again", "guard-a")
		if ok, err := e.s.NoteRerun(e.ctx, ns, "evt_again", keystore.HistoryRerunStarted, "57"); err != nil || !ok {
			t.Fatalf("note: %v %v", ok, err)
		}
		e.clock.Advance(started)
		if at, ok = claimBy(e, "evt_again", "guard-a"); !ok {
			t.Fatal("a stale started re-run was not claimed")
		}
		if ok, err := e.s.ReleaseRerunClaim(e.ctx, ns, "evt_again", "guard-a", at); err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
		if rec := e.lookup(ns, "evt_again").Record; rec.Stage != keystore.StageStarted || keystore.RerunStartedAs(rec) != "57" {
			t.Fatalf("after the hand-back: stage %q started as %q, want started 57", rec.Stage, keystore.RerunStartedAs(rec))
		}
		if _, ok := claimBy(e, "evt_again", "guard-b"); !ok {
			t.Fatal("the stale started re-run was not claimable at once after the hand-back")
		}
	})
}
