package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Checks before paging (keystore/check.go): an unknown key whose
// namespace names a check waits for it, durably, without a page; the
// guards claim its call one at a time; the answer decides the key unless
// something else did first.

func checkStore(t *testing.T, e *env) keystore.CheckStore {
	t.Helper()
	return e.s
}

// unknownHeld makes key unknown in ns (a namespace with a check) and
// returns its record; resume is where its execution waits ("" none).
func unknownHeld(t *testing.T, e *env, key, resume string) *keystore.Record {
	t.Helper()
	r := e.reserve(ns, key)
	f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: r.Token, Reason: keystore.ReasonOutcomeUnknown, Message: "CRM timeout", ResumeURL: resume})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, f, keystore.StateUnknown)
	return f.Record
}

func claimCheck(t *testing.T, e *env, key string, attempt int) keystore.CheckClaim {
	t.Helper()
	_, c, err := checkStore(t, e).ClaimCheck(e.ctx, ns, key, attempt, 30*time.Second, keystore.DefaultCheckClaims)
	if err != nil {
		t.Fatalf("claim the check of %s: %v", key, err)
	}
	return c
}

func answerCheck(t *testing.T, e *env, key string, attempt int, a keystore.CheckAnswer) (*keystore.Record, bool) {
	t.Helper()
	r, ok, err := checkStore(t, e).CheckAnswered(e.ctx, ns, key, attempt, a)
	if err != nil {
		t.Fatalf("the check's answer about %s: %v", key, err)
	}
	return r, ok
}

func heldKeys(t *testing.T, e *env) []string {
	t.Helper()
	rs, err := checkStore(t, e).HeldForCheck(e.ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range rs {
		if r.Check == nil {
			t.Fatalf("%s listed without its hold", r.Key)
		}
		keys = append(keys, r.Key)
	}
	return keys
}

func eventKinds(e *env, key string) []keystore.EventKind {
	var out []keystore.EventKind
	for _, ev := range e.events() {
		if ev.Key == key {
			out = append(out, ev.Kind)
		}
	}
	return out
}

func runChecks(t *testing.T, newStore New) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Check: "crm-lookup"}}}
	found := keystore.CheckAnswer{Result: keystore.CheckFound, Reference: "crm-77", Workflow: "lead check", Execution: "4711"}
	absent := keystore.CheckAnswer{Result: keystore.CheckAbsent, Workflow: "lead check", Execution: "4712"}

	t.Run("an unknown key waits for its check without a page, across a restart; found completes it with the reference", func(t *testing.T) {
		e := setup(t, newStore, pol)
		unknownHeld(t, e, "evt_1", "")
		if k := eventKinds(e, "evt_1"); len(k) != 0 {
			t.Fatalf("events %v: the person was paged while the check is pending", k)
		}
		e.restart()
		if got := heldKeys(t, e); len(got) != 1 || got[0] != "evt_1" {
			t.Fatalf("held = %v", got)
		}
		if c := claimCheck(t, e, "evt_1", 1); c != keystore.CheckClaimed {
			t.Fatalf("claim: %v", c)
		}
		if c := claimCheck(t, e, "evt_1", 1); c != keystore.CheckRefused {
			t.Fatalf("a second claim while the first holds: %v", c)
		}
		e.restart()
		r, ok := answerCheck(t, e, "evt_1", 1, found)
		if !ok || r.State != keystore.StateCompleted || r.ResultRef != "crm-77" || r.Check != nil {
			t.Fatalf("found: ok %v, %+v", ok, r)
		}
		h := r.History[len(r.History)-1]
		if h.Event != keystore.HistoryChecked || h.By != "check:crm-lookup" || h.Detail != "found crm-77 (workflow lead check, execution 4711)" {
			t.Fatalf("history: %+v", h)
		}
		e.restart()
		sameRecord(t, r, e.lookup(ns, "evt_1").Record)
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeDuplicate)
		if k := eventKinds(e, "evt_1"); len(k) != 1 || k[0] != keystore.EventKeyResolved {
			t.Fatalf("events %v, want one key_resolved", k)
		}
		if _, ok := answerCheck(t, e, "evt_1", 1, absent); ok {
			t.Fatal("a second answer was taken")
		}
		if len(heldKeys(t, e)) != 0 {
			t.Fatal("a decided key is still held")
		}
	})
	t.Run("absent: failed and retryable, the next copy writes; with a waiting execution: parked for the catch-up", func(t *testing.T) {
		e := setup(t, newStore, pol)
		unknownHeld(t, e, "evt_1", "")
		r, ok := answerCheck(t, e, "evt_1", 1, absent)
		if !ok || r.State != keystore.StateFailed || !r.Retryable {
			t.Fatalf("absent: %+v", r)
		}
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeAccepted)
		unknownHeld(t, e, "evt_2", resumeBase+"55")
		r, _ = answerCheck(t, e, "evt_2", 1, absent)
		if r.State != keystore.StateParked || r.ResumeURL != resumeBase+"55" {
			t.Fatalf("absent with a waiting execution: %+v", r)
		}
		if _, ok, err := parkStore(t, e).ClaimResume(e.ctx, ns, "evt_2", time.Minute); err != nil || !ok {
			t.Fatalf("the catch-up cannot claim it: %v %v", ok, err)
		}
	})
	t.Run("no usable answer, or the claims used up: the person is paged once, as without a check", func(t *testing.T) {
		e := setup(t, newStore, pol)
		unknownHeld(t, e, "evt_1", "")
		r, ok := answerCheck(t, e, "evt_1", 1, keystore.CheckAnswer{Result: keystore.CheckFailed, Detail: "the check answered 500"})
		if !ok || r.State != keystore.StateUnknown || r.Check != nil {
			t.Fatalf("failed check: %+v", r)
		}
		if k := eventKinds(e, "evt_1"); len(k) != 1 || k[0] != keystore.EventKeyUnknown {
			t.Fatalf("events %v, want one key_unknown", k)
		}
		if _, ok := answerCheck(t, e, "evt_1", 1, found); ok {
			t.Fatal("an answer after the page was taken")
		}
		unknownHeld(t, e, "evt_2", "")
		for i := 0; i < keystore.DefaultCheckClaims; i++ {
			if c := claimCheck(t, e, "evt_2", 1); c != keystore.CheckClaimed {
				t.Fatalf("claim %d: %v", i+1, c)
			}
			e.clock.Advance(31 * time.Second) // the claim lapses: a crash
		}
		if c := claimCheck(t, e, "evt_2", 1); c != keystore.CheckGaveUp {
			t.Fatalf("claim after the claims were used up: %v", c)
		}
		if k := eventKinds(e, "evt_2"); len(k) != 1 || k[0] != keystore.EventKeyUnknown {
			t.Fatalf("events %v, want one key_unknown", k)
		}
	})
	t.Run("a person's decision made while the check runs stands", func(t *testing.T) {
		e := setup(t, newStore, pol)
		unknownHeld(t, e, "evt_1", "")
		claimCheck(t, e, "evt_1", 1)
		res, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: keystore.StateCompleted, By: "ops@example", Note: "found it in the CRM", ResultRef: "crm-1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := answerCheck(t, e, "evt_1", 1, absent); ok {
			t.Fatal("the check's answer overruled the person")
		}
		sameRecord(t, res.Record, e.lookup(ns, "evt_1").Record)
	})
	t.Run("an expired lease waits for the check too (the sweeper)", func(t *testing.T) {
		e := setup(t, newStore, pol)
		e.reserve(ns, "evt_1", func(r *keystore.ReserveRequest) { r.Lease = time.Second })
		e.clock.Advance(2 * time.Second)
		if _, err := e.s.Sweep(e.ctx); err != nil {
			t.Fatal(err)
		}
		wantState(t, e.lookup(ns, "evt_1"), keystore.StateUnknown)
		if got := heldKeys(t, e); len(got) != 1 || len(eventKinds(e, "evt_1")) != 0 {
			t.Fatalf("held %v, events %v", got, eventKinds(e, "evt_1"))
		}
	})
	t.Run("a check's claim is extended by its holder while its call is in flight, and handed back uncounted when not used", func(t *testing.T) {
		e := setup(t, newStore, pol)
		unknownHeld(t, e, "evt_1", "")
		cs := checkStore(t, e)
		rec, c, err := cs.ClaimCheck(e.ctx, ns, "evt_1", 1, 30*time.Second, keystore.DefaultCheckClaims)
		if err != nil || c != keystore.CheckClaimed {
			t.Fatalf("claim: %v %v", c, err)
		}
		held := *rec.Check.ClaimUntil
		// 25 s later its holder extends it: 30 s from then.
		e.clock.Advance(25 * time.Second)
		until, ok, err := cs.ExtendCheckClaim(e.ctx, ns, "evt_1", 1, held, 30*time.Second)
		if err != nil || !ok || !until.Equal(e.clock.Now().Add(30*time.Second)) {
			t.Fatalf("extend: %v %v %v, want until %v", until, ok, err, e.clock.Now().Add(30*time.Second))
		}
		e.restart()
		cs = checkStore(t, e)
		e.clock.Advance(20 * time.Second) // past the first claim's end
		if c := claimCheck(t, e, "evt_1", 1); c != keystore.CheckRefused {
			t.Fatalf("a second guard claimed a check under an extended claim: %v", c)
		}
		// Not the holder's claim any more (a stale until), or another attempt: nothing changes.
		if _, ok, err := cs.ExtendCheckClaim(e.ctx, ns, "evt_1", 1, held, time.Hour); err != nil || ok {
			t.Fatalf("a stale holder extended the claim: %v %v", ok, err)
		}
		if ok, err := cs.ReleaseCheckClaim(e.ctx, ns, "evt_1", 1, held); err != nil || ok {
			t.Fatalf("a stale holder handed the claim back: %v %v", ok, err)
		}
		if ok, err := cs.ReleaseCheckClaim(e.ctx, ns, "evt_1", 2, until); err != nil || ok {
			t.Fatalf("the claim was handed back for another attempt: %v %v", ok, err)
		}
		// Handed back: no claim, none counted, and the next claim comes at once.
		if ok, err := cs.ReleaseCheckClaim(e.ctx, ns, "evt_1", 1, until); err != nil || !ok {
			t.Fatalf("hand back: %v %v", ok, err)
		}
		e.restart()
		cs = checkStore(t, e)
		if h := e.lookup(ns, "evt_1").Record.Check; h == nil || h.ClaimUntil != nil || h.Claims != 0 {
			t.Fatalf("a handed-back check: %+v, want held, unclaimed, no claim counted", h)
		}
		if ok, err := cs.ReleaseCheckClaim(e.ctx, ns, "evt_1", 1, until); err != nil || ok {
			t.Fatalf("handed back twice: %v %v", ok, err)
		}
		if c := claimCheck(t, e, "evt_1", 1); c != keystore.CheckClaimed {
			t.Fatalf("the handed-back check is not claimed at once: %v", c)
		}
		// Answered: nothing to extend or hand back.
		cur := e.lookup(ns, "evt_1").Record
		answerCheck(t, e, "evt_1", 1, found)
		if _, ok, err := cs.ExtendCheckClaim(e.ctx, ns, "evt_1", 1, *cur.Check.ClaimUntil, 30*time.Second); err != nil || ok {
			t.Fatalf("an answered claim was extended: %v %v", ok, err)
		}
		if ok, err := cs.ReleaseCheckClaim(e.ctx, ns, "evt_1", 1, *cur.Check.ClaimUntil); err != nil || ok {
			t.Fatalf("an answered claim was handed back: %v %v", ok, err)
		}
	})
	t.Run("guards claiming one key's check at once: exactly one calls it", func(t *testing.T) {
		e := setup(t, newStore, pol)
		unknownHeld(t, e, "evt_1", "")
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, c, err := checkStore(t, e).ClaimCheck(e.ctx, ns, "evt_1", 1, time.Minute, keystore.DefaultCheckClaims)
				if err != nil {
					t.Error(err)
				}
				if c == keystore.CheckClaimed {
					won.Add(1)
				}
			}()
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("%d guards claimed the check, want 1", won.Load())
		}
	})
}
