package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The commit signal (keystore.CommitFeed): every write the store commits
// wakes this process's workers (catch-up, notify, checks) at once; an
// answer that writes nothing wakes no one, a burst makes one wake, and a
// stopped subscription is not woken.
func runCommits(t *testing.T, newStore New) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: time.Hour, UnreachableThreshold: 1}}}
	woken := func(t *testing.T, wake <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-wake:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s committed, but no subscriber was woken within 5 s", what)
		}
	}
	// quiet waits out a wake held back by the cooldown, then drains.
	quiet := func(wake <-chan struct{}) {
		time.Sleep(2 * keystore.CommitCooldown)
		select {
		case <-wake:
		default:
		}
	}
	notWoken := func(t *testing.T, wake <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-wake:
			t.Fatalf("a subscriber was woken by %s", what)
		case <-time.After(3 * keystore.CommitCooldown):
		}
	}

	t.Run("each committed write wakes every subscriber", func(t *testing.T) {
		e := setup(t, newStore, pol)
		a, stopA := e.s.Commits()
		defer stopA()
		b, stopB := e.s.Commits()
		defer stopB()
		r := e.reserve(ns, "evt_1")
		woken(t, a, "a reserve")
		woken(t, b, "a reserve")
		e.complete(ns, "evt_1", r.Token, "crm-1")
		woken(t, a, "a complete (a resumed execution finished)")
		woken(t, b, "a complete")
		r = e.reserve(ns, "evt_2")
		e.fail(ns, "evt_2", r.Token, keystore.ReasonOutcomeUnknown)
		quiet(a)
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_2", Resolution: keystore.StateCompleted,
			By: "Ana", Note: "in the CRM"}); err != nil {
			t.Fatal(err)
		}
		woken(t, a, "a resolve")
		// The breaker opens and the key parks: the catch-up is woken.
		r = e.reserve(ns, "evt_3", func(q *keystore.ReserveRequest) { q.Destination = "crm" })
		quiet(a)
		if f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_3", Token: r.Token,
			Reason: keystore.ReasonDestinationUnreachable, ResumeURL: "http://n8n.local/webhook-waiting/3"}); err != nil || f.Outcome != keystore.OutcomeParked {
			t.Fatalf("park: %+v %v", f, err)
		}
		woken(t, a, "a park")
		// A person's change of a breaker alone (a maintenance window, a
		// reset) wakes the catch-up too.
		quiet(a)
		if _, err := e.s.HoldDestination(e.ctx, "erp", "Ana", "upgrade", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		woken(t, a, "a maintenance window")
		quiet(a)
		if _, err := e.s.ResetBreaker(e.ctx, "erp", "Ana", "upgrade cancelled"); err != nil {
			t.Fatal(err)
		}
		woken(t, a, "a breaker reset")
	})

	t.Run("a keyed subscriber hears the keys it matches, a breaker by its destination", func(t *testing.T) {
		e := setup(t, newStore, pol)
		keys := e.s.CommittedKeys(func(k keystore.CommittedKey) bool { return k.Namespace == ns || k.Destination == "erp" })
		defer keys.Stop()
		// Taken until what the writes promise has come: the commits of
		// another namespace never do.
		took := func(t *testing.T, what string, want ...keystore.CommittedKey) {
			t.Helper()
			var got []keystore.CommittedKey
			for len(got) < len(want) {
				woken(t, keys.C, what)
				k, all := keys.Take()
				if all {
					t.Fatalf("%s: a commit did not say its keys", what)
				}
				got = append(got, k...)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: took %v, want %v", what, got, want)
			}
		}
		e.reserve("other", "evt_1")
		r := e.reserve(ns, "evt_1", withDest("crm"))
		took(t, "a reserve", keystore.CommittedKey{Namespace: ns, Key: "evt_1", Destination: "crm"})
		e.reserve("other", "evt_2")
		e.complete(ns, "evt_1", r.Token, "crm-1")
		took(t, "a complete", keystore.CommittedKey{Namespace: ns, Key: "evt_1", Destination: "crm"})
		e.reserve("other", "evt_3")
		if _, err := e.s.HoldDestination(e.ctx, "erp", "Ana", "upgrade", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		took(t, "a maintenance window", keystore.CommittedKey{Destination: "erp"})
	})

	t.Run("a feed of the keys at one stage is woken by their commits alone, with the stage they are at", func(t *testing.T) {
		e := setup(t, newStore, pol)
		granted := func(k keystore.CommittedKey) bool { return k.Stage == keystore.StageGranted }
		wake, stop := keystore.CommitsOf(e.s, granted).Commits()
		defer stop()
		keys := e.s.CommittedKeys(granted)
		defer keys.Stop()
		const owner = "n8n wf1 exec 42"
		r := e.reserve(ns, "evt_1", func(q *keystore.ReserveRequest) { q.Owner = owner })
		e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationFailed)
		wantOutcome(t, e.reserve(ns, "evt_1", func(q *keystore.ReserveRequest) { q.Rerun, q.Owner = true, owner }), keystore.OutcomeRerunNotGranted)
		for i := range 20 {
			e.reserve("other", fmt.Sprint("evt_", i))
		}
		notWoken(t, wake, "commits of keys at no stage or another")
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "CRM is back"}); err != nil {
			t.Fatal(err)
		}
		woken(t, wake, "a grant")
		woken(t, keys.C, "a grant")
		if got, all := keys.Take(); all || fmt.Sprint(got) != fmt.Sprint([]keystore.CommittedKey{{Namespace: ns, Key: "evt_1", Stage: keystore.StageGranted}}) {
			t.Fatalf("took %v (all %v), want the granted key at its stage", got, all)
		}
	})

	t.Run("a sweep that expires a lease and a bulk decision wake every subscriber", func(t *testing.T) {
		// The operation layer runs both (keystore/sweep.go, bulk.go); the
		// key going unknown and the keys decided are what the notify and
		// re-run workers act on.
		e := setup(t, newStore, pol)
		wake, stop := e.s.Commits()
		defer stop()
		e.reserve(ns, "evt_1", func(r *keystore.ReserveRequest) { r.Lease = 10 * time.Second })
		e.clock.Advance(11 * time.Second)
		quiet(wake)
		if st, err := e.s.Sweep(e.ctx); err != nil || st.LeasesExpired != 1 {
			t.Fatalf("sweep: %+v %v", st, err)
		}
		woken(t, wake, "a sweep that moved a key to unknown")
		quiet(wake)
		res, err := keystore.ResolveMany(e.ctx, e.s, keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: ns, States: []keystore.State{keystore.StateUnknown}},
			Resolution: keystore.StateCompleted, By: "Ana", Note: "in the CRM"})
		if err != nil || res.Decided != 1 {
			t.Fatalf("bulk: %+v %v", res, err)
		}
		woken(t, wake, "a bulk decision")
	})

	t.Run("an answer that writes nothing wakes no one", func(t *testing.T) {
		e := setup(t, newStore, pol)
		r := e.reserve(ns, "evt_1")
		e.complete(ns, "evt_1", r.Token, "crm-1")
		wake, stop := e.s.Commits()
		defer stop()
		quiet(wake)
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeDuplicate)
		if _, ok, err := e.s.ClaimResume(e.ctx, ns, "evt_1", time.Minute); err != nil || ok {
			t.Fatalf("claim of a completed key: %v %v", ok, err)
		}
		notWoken(t, wake, "a duplicate and a refused claim, which write nothing")
	})

	t.Run("a burst of commits wakes a busy subscriber once, and a stopped one not at all", func(t *testing.T) {
		e := setup(t, newStore, pol)
		wake, stop := e.s.Commits()
		for i := range 10 {
			e.reserve(ns, "evt_"+string(rune('a'+i)))
		}
		// One wake waited in the channel; at most one more was held back
		// by the cooldown; then nothing.
		woken(t, wake, "ten reserves")
		quiet(wake)
		notWoken(t, wake, "a burst that had ended")
		stop()
		e.reserve(ns, "evt_z")
		notWoken(t, wake, "a reserve after stop")
	})
}
