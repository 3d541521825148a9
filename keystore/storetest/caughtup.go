package storetest

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The end of a catch-up (keystore.EventCaughtUp) is one event with its
// figures, read back as written after a restart: notify takes the took
// of the outage's message from it.
func runCaughtUp(t *testing.T, newStore New) {
	t.Run("a caught-up catch-up is one event with its figures", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		if err := e.s.RecordCaughtUp(e.ctx, "hubspot", 35, 2, 2*time.Minute+16*time.Second+250*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		e.restart()
		evs := e.events()
		if len(evs) != 1 {
			t.Fatalf("events = %+v, want the caught_up event alone", evs)
		}
		ev := evs[0]
		if ev.Kind != keystore.EventCaughtUp || ev.Destination != "hubspot" || ev.Resumed != 35 || ev.Lost != 2 ||
			ev.Took != 2*time.Minute+16*time.Second+250*time.Millisecond || !ev.At.Equal(e.clock.Now()) ||
			ev.Message != "caught up: 35 resumed, 2 lost (owner told), took 2 min 17 s" {
			t.Fatalf("caught_up read back as %+v", ev)
		}
		if _, err := e.s.Destinations(e.ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a caught-up report names a valid destination", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		if err := e.s.RecordCaughtUp(e.ctx, "Bad Destination", 1, 0, time.Second); err == nil {
			t.Fatal("a caught-up report of an invalid destination was written")
		}
		if evs := e.events(); len(evs) != 0 {
			t.Fatalf("events = %+v, want none", evs)
		}
	})
}
