package rerun_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// BenchmarkRoundAtFailedKeysNoGrantPostgres is BenchmarkRoundAtFailedKeysNoGrant
// on PostgreSQL: 20,000 failed keys wait at their gate, none granted. The
// rows are written in SQL, as the guard writes a key stopped at its gate.
func BenchmarkRoundAtFailedKeysNoGrantPostgres(b *testing.B) {
	ctx := context.Background()
	u := pgtest.FreshSchema(b, pgtest.URL(b, "the re-run round on PostgreSQL"))
	s, err := postgres.Open(ctx, u, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Pool().Exec(ctx, `INSERT INTO guard_keys (namespace, key, state, attempt, owner, created_at, updated_at, reason, message, retryable, history)
		SELECT 'crm', 'k' || lpad(i::text, 5, '0'), 'failed', 1, 'n8n wf1 exec ' || i, now(), now(), 'destination_failed', 'HTTP 503', true,
			jsonb_build_array(
				jsonb_build_object('at', now(), 'event', 'reserved', 'attempt', 1, 'by', 'n8n wf1 exec ' || i),
				jsonb_build_object('at', now(), 'event', 'failed', 'attempt', 1, 'detail', 'HTTP 503'),
				jsonb_build_object('at', now(), 'event', 'rerun_gate', 'attempt', 1, 'by', 'n8n wf1 exec ' || i, 'detail', 'the execution waits at its re-run gate'))
		FROM generate_series(1, 20000) AS i`); err != nil {
		b.Fatal(err)
	}
	f := newN8n(func(string) (string, error) { return "57", nil })
	r, err := rerun.New(s, f, rerun.Options{Reads: -1, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		rerun.Round(ctx, r)
	}
	b.StopTimer()
	if len(f.retries()) != 0 {
		b.Fatalf("retries %v, want none", f.retries())
	}
}
