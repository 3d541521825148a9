package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// Events whose time was set by hand to ±infinity (no time.Time holds it;
// every other column is typed and NOT NULL): notify's intake and the
// audit read every other event, the store says so once per event (a line
// and Options.Damaged), and the sweep goes on past them.
func (pg *pgEnv) testDamagedEvent(t *testing.T) {
	ctx := context.Background()
	var logs logbuf.Buffer
	var damaged atomic.Int32
	s := openPostgres(t, pg.freshSchema(t), postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Damaged: func() { damaged.Add(1) }})
	defer s.Close()
	if _, err := s.Pool().Exec(ctx, `INSERT INTO guard_events (seq, at, kind, key, reopens_at) VALUES
		(1, now(), 'key_unknown', 'evt_1', NULL), (2, 'infinity', 'key_unknown', 'evt_2', NULL),
		(3, now(), 'key_unknown', 'evt_3', NULL), (4, now(), 'breaker_opened', '', '-infinity'),
		(5, now(), 'key_unknown', 'evt_5', NULL)`); err != nil {
		t.Fatal(err)
	}
	seqs := func(evs []keystore.Event, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		var got []uint64
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
		return fmt.Sprint(got)
	}
	for range 2 {
		if got := seqs(s.Events(ctx, 0, 1000)); got != "[1 3 5]" {
			t.Fatalf("events = %s, want every readable one", got)
		}
	}
	if got := seqs(s.Events(ctx, 1, 1)); got != "[3]" {
		t.Fatalf("one event after seq 1 = %s, want seq 3", got)
	}
	if got := seqs(s.RecentEvents(ctx, keystore.EventQuery{})); got != "[5 3 1]" {
		t.Fatalf("recent events = %s", got)
	}
	if _, err := s.Sweep(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if n := damaged.Load(); n != 2 || strings.Count(logs.String(), "an event of the event log cannot be read") != 2 {
		t.Fatalf("damage told %d times, logged:\n%s", n, logs.String())
	}
}
