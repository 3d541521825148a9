package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Races between guards that share one store's data at once: two handles
// opened on the same data, as two replicas hold them (PostgreSQL, also
// through PgBouncer; a bbolt file belongs to one process). A race left to
// the scheduler may pass on a store that decides on stale reads, so these
// cases make it happen every time: another transaction holds what the two
// guards race for (Holder), both guards are seen waiting for it, and only
// then is it let go. Both guards have then read, or queued to read, the
// same state; a store that locks what it reads decides one after the
// other, one that does not lets both through.

// Holder holds, in a transaction of its own, what guards race for.
type Holder interface {
	// HoldPace locks dest's resume pace row, which must exist.
	HoldPace(t *testing.T, dest string) Hold
	// HoldBulk inserts bulk id id without committing it.
	HoldBulk(t *testing.T, id string) Hold
}

// Hold is one held thing: Waiting counts the sessions waiting for it,
// Release lets it go (a rollback: nothing of the holder's stays).
type Hold struct {
	Waiting func() int
	Release func()
}

// NewShared prepares empty data for one test and returns its opener (each
// call another handle on the same data, open at the same time) and its
// holder.
type NewShared func(t *testing.T, clock keystore.Clock, pol keystore.Policies) (Opener, Holder)

// RunShared runs the cases of guards sharing one store.
func RunShared(t *testing.T, newShared NewShared) {
	t.Run("two guards race for the pace of a destination that has a pace row", func(t *testing.T) {
		pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {CatchUpRate: 10, CatchUpConcurrency: 4}}}
		e, a, b, h := sharedSetup(t, newShared, pol)
		// The row exists: its first turn made it. Later takers find it
		// and read it; an insert of a new row serializes nothing here.
		if _, ok, _, err := a.TakeResumeTurn(e.ctx, keystore.TurnRequest{Destination: "hubspot", Hold: time.Minute}); err != nil || !ok {
			t.Fatalf("first turn: ok %v %v", ok, err)
		}
		e.clock.Advance(time.Second) // the rate allows the next turn, one only
		for round := range 3 {
			hold := h.HoldPace(t, "hubspot")
			got := race(t, hold, a, b, func(s keystore.Store) (bool, error) {
				_, ok, _, err := s.TakeResumeTurn(e.ctx, keystore.TurnRequest{Destination: "hubspot", Hold: time.Minute})
				return ok, err
			})
			if got != 1 {
				t.Fatalf("round %d: %d of 2 guards got a turn at once, want 1 (catch_up_rate 10 allows one per 100 ms): the pace was decided on a row read without its lock", round, got)
			}
			e.clock.Advance(time.Second)
		}
	})
	t.Run("two guards sweep at once", func(t *testing.T) { runSharedSweep(t, newShared) })
	t.Run("two guards given one bulk id with different content at once: one runs, the other is refused", func(t *testing.T) {
		e, a, b, h := sharedSetup(t, newShared, keystore.Policies{})
		for i := range 4 {
			e.unknown(ns, "ord-"+string(rune('1'+i)), "n8n Orders exec")
		}
		const id = "b-0000race"
		req := func(note string) keystore.BulkResolveRequest {
			return keystore.BulkResolveRequest{ID: id, Filter: keystore.Filter{Namespace: ns, KeyPrefix: "ord-"},
				Resolution: keystore.StateFailed, Final: true, By: "ann@example.com", Note: note}
		}
		notes := map[keystore.Store]string{a: "CRM incident 4711: duplicates", b: "CRM incident 4712: spam"}
		var (
			mu       sync.Mutex
			refusals []error
		)
		hold := h.HoldBulk(t, id)
		got := race(t, hold, a, b, func(s keystore.Store) (bool, error) {
			_, err := keystore.ResolveMany(e.ctx, s, req(notes[s]))
			if errs.CodeOf(err) == errs.Conflict {
				mu.Lock()
				refusals = append(refusals, err)
				mu.Unlock()
				return false, nil
			}
			return err == nil, err
		})
		if got != 1 || len(refusals) != 1 {
			t.Fatalf("%d of 2 bulk decisions under one id with different content ran and %d were refused, want 1 and 1", got, len(refusals))
		}
		// Every key names the one decision that ran, with its note.
		actions, err := e.s.BulkActions(e.ctx, []string{id})
		if err != nil || len(actions) != 1 {
			t.Fatalf("bulk actions: %v %v", actions, err)
		}
		for i := range 4 {
			r := e.lookup(ns, "ord-"+string(rune('1'+i))).Record
			if r.State != keystore.StateFailed || r.Note != actions[id].Note {
				t.Fatalf("%s: state %s, note %q; the decision that ran says %q", r.Key, r.State, r.Note, actions[id].Note)
			}
		}
	})
}

// Two guards sweeping one store at once (keystore/sweep.go over each
// store's SweepDue) share the due keys: each lapsed lease goes unknown
// once, each finished record past its retention is deleted once, and
// their stats add up to what was due.
func runSharedSweep(t *testing.T, newShared NewShared) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Lease: 10 * time.Second, Retention: time.Minute}}}
	e, a, b, _ := sharedSetup(t, newShared, pol)
	const n = 40
	for i := range n {
		e.reserve(ns, fmt.Sprintf("lapsed-%02d", i))
		r := e.reserve(ns, fmt.Sprintf("done-%02d", i))
		e.complete(ns, fmt.Sprintf("done-%02d", i), r.Token, "crm")
	}
	e.clock.Advance(2 * time.Minute)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total keystore.SweepStats
	)
	for _, s := range []keystore.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.Sweep(e.ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total.LeasesExpired, total.Expired = total.LeasesExpired+st.LeasesExpired, total.Expired+st.Expired
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total.LeasesExpired != n || total.Expired != n {
		t.Fatalf("two sweeps at once: %d leases expired, %d records deleted; want %d and %d", total.LeasesExpired, total.Expired, n, n)
	}
	unknown := 0
	for _, ev := range e.events() {
		if ev.Kind == keystore.EventKeyUnknown {
			unknown++
		}
	}
	if unknown != n {
		t.Fatalf("%d key_unknown events, want %d (one per lapsed lease)", unknown, n)
	}
	for i := range n {
		wantState(t, e.lookup(ns, fmt.Sprintf("lapsed-%02d", i)), keystore.StateUnknown)
		if r := e.lookup(ns, fmt.Sprintf("done-%02d", i)); r.Outcome != keystore.OutcomeAbsent {
			t.Fatalf("done-%02d after its retention: %s", i, r.Outcome)
		}
	}
}

// sharedSetup opens the test's store (e.s, used to prepare and read) and
// two more handles on the same data: the racing guards.
func sharedSetup(t *testing.T, newShared NewShared, pol keystore.Policies) (*env, keystore.Store, keystore.Store, Holder) {
	t.Helper()
	c := NewClock()
	open, h := newShared(t, c.Now, pol)
	e := &env{t: t, clock: c, open: open, s: open()}
	e.ctx = t.Context()
	a, b := open(), open()
	t.Cleanup(func() { e.s.Close(); a.Close(); b.Close() })
	return e, a, b, h
}

// race runs do on a and b at once while hold is held, lets it go once both
// wait for it, and counts the calls that said true.
func race(t *testing.T, hold Hold, a, b keystore.Store, do func(keystore.Store) (bool, error)) int {
	t.Helper()
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got int
	)
	for _, s := range []keystore.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := do(s)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				got++
				mu.Unlock()
			}
		}()
	}
	var waiting int
	testwait.Poll(testwait.Deadline, func() bool { waiting = hold.Waiting(); return waiting >= 2 })
	hold.Release()
	wg.Wait()
	if waiting < 2 {
		t.Fatalf("the two guards did not both wait for the held row within 30 s (%d waited): the race was not made", waiting)
	}
	return got
}
