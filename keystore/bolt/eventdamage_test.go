package bolt

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// One event of the log that cannot be decoded (seq 3 of 5, an hour apart):
// notify's intake and the audit read every other event; the sweep removes
// the events before it when they are due, keeps it while the event after
// it is kept, removes it with that event, and then the events after it;
// the store says so once, in one line and to the Observer.
func TestADamagedEventHoldsBackNoOther(t *testing.T) {
	clock := fakeclock.New()
	var logs logbuf.Buffer
	obs := &damageObserver{}
	s, err := Open(filepath.Join(t.TempDir(), "guard.db"), Options{Clock: clock.Now, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	start := clock.Now()
	for i := 1; i <= 5; i++ {
		ev := keystore.Event{At: clock.Now(), Kind: keystore.EventKeyUnknown, Namespace: "crm", Key: fmt.Sprintf("evt_%d", i)}
		if err := s.change(func(tx *bbolt.Tx, _ time.Time) error { return appendEvent(tx, ev) }); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
	}
	if err := s.change(func(tx *bbolt.Tx, _ time.Time) error { return put(tx, bkEvents, u64(3), []byte{0xff, 0x00}) }); err != nil {
		t.Fatal(err)
	}
	seqs := func() string {
		t.Helper()
		evs, err := s.Events(ctx, 0, 1000)
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		var got []uint64
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
		return fmt.Sprint(got)
	}
	if got := seqs(); got != "[1 2 4 5]" {
		t.Fatalf("events = %s, want every intact one", got)
	}
	if evs, err := s.Events(ctx, 2, 1); err != nil || len(evs) != 1 || evs[0].Seq != 4 {
		t.Fatalf("one event after seq 2 = %+v %v, want seq 4", evs, err)
	}
	recent, err := s.RecentEvents(ctx, keystore.EventQuery{})
	if err != nil || len(recent) != 4 {
		t.Fatalf("recent events = %d %v, want the 4 intact ones", len(recent), err)
	}

	sweepTo := func(at time.Time, want string) {
		t.Helper()
		clock.Set(at)
		if _, err := s.Sweep(ctx); err != nil {
			t.Fatalf("sweep at %v: %v", at.Sub(start), err)
		}
		if got := seqs(); got != want {
			t.Fatalf("after the sweep at %v: events = %s, want %s", at.Sub(start), got, want)
		}
	}
	week := keystore.EventRetention
	sweepTo(start.Add(week+2*time.Hour+30*time.Minute), "[4 5]") // 1 and 2 due; 4 is not, so the damaged 3 stays
	if n := rawEvents(t, s); n != 3 {
		t.Fatalf("stored events = %d, want 3 (the damaged one kept with 4 and 5)", n)
	}
	sweepTo(start.Add(week+3*time.Hour), "[5]") // 4 due: the damaged 3 goes with it
	if n := rawEvents(t, s); n != 1 {
		t.Fatalf("stored events = %d, want 1", n)
	}
	sweepTo(start.Add(week+4*time.Hour), "[]")

	if obs.damaged != 1 || strings.Count(logs.String(), "an event of the event log cannot be read") != 1 {
		t.Fatalf("damage counted %d times, logged:\n%s", obs.damaged, logs.String())
	}
}

// rawEvents counts the stored events, damaged ones included.
func rawEvents(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.view(func(tx *bbolt.Tx) error { n = tx.Bucket(bucketEvents).Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
