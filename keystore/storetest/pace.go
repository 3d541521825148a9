package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The catch-up pace (keystore.DecideResumeTurn) as a store keeps it:
// turns spaced by the rate, at most catch_up_concurrency slots held, a
// released slot free again, and of simultaneous takers exactly one gets
// the turn (on PostgreSQL the guards sharing the database take turns in
// one row).
func runPace(t *testing.T, newStore New) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {CatchUpRate: 10, CatchUpConcurrency: 2}}}
	hold := time.Minute
	t.Run("turns keep the rate and the slots", func(t *testing.T) {
		e := setup(t, newStore, pol)
		take := func(wantOK bool, wantWait time.Duration) keystore.Turn {
			t.Helper()
			tu, ok, wait, err := e.s.TakeResumeTurn(e.ctx, keystore.TurnRequest{Destination: "hubspot", Hold: hold})
			if err != nil || ok != wantOK || wait != wantWait {
				t.Fatalf("take: ok %v wait %s (%v), want ok %v wait %s", ok, wait, err, wantOK, wantWait)
			}
			return tu
		}
		first := take(true, 0)
		if !first.At.Equal(e.clock.Now()) || !first.Until.Equal(e.clock.Now().Add(hold)) {
			t.Fatalf("first turn %+v", first)
		}
		e.clock.Advance(40 * time.Millisecond)
		take(false, 60*time.Millisecond)
		e.clock.Advance(60 * time.Millisecond)
		second := take(true, 0)
		if second.Slot == first.Slot {
			t.Fatalf("two turns in slot %d", first.Slot)
		}
		e.clock.Advance(time.Second)
		take(false, 0) // both slots held
		if err := e.s.ReleaseResumeTurn(e.ctx, first); err != nil {
			t.Fatal(err)
		}
		if third := take(true, 0); third.Slot != first.Slot {
			t.Fatalf("released slot %d, took %d", first.Slot, third.Slot)
		}
		e.clock.Advance(time.Second)
		take(false, 0)
		// A slot whose holder died frees itself when its hold ends.
		e.clock.Advance(hold)
		take(true, 0)
	})
	t.Run("of simultaneous takers exactly one gets the turn", func(t *testing.T) {
		e := setup(t, newStore, pol)
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, _, err := e.s.TakeResumeTurn(e.ctx, keystore.TurnRequest{Destination: "hubspot", Hold: hold})
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
		wg.Wait()
		if got != 1 {
			t.Fatalf("%d of 8 simultaneous takers got a turn, want 1 (the rate allows one per 100 ms)", got)
		}
	})
	t.Run("a destination name is checked", func(t *testing.T) {
		e := setup(t, newStore, pol)
		if _, _, _, err := e.s.TakeResumeTurn(e.ctx, keystore.TurnRequest{Destination: "", Hold: hold}); err == nil {
			t.Fatal("an empty destination took a turn")
		}
	})
}
