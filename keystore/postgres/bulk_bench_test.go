package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// BenchmarkResolveMany100k decides 100,000 unknown keys in one bulk
// decision on PostgreSQL, then checks in SQL that every key's history
// names the action and the person. The keys are loaded with one INSERT …
// SELECT. Run with -benchtime 1x; KEYSTORE_BULK_KEYS changes the count.
//
//	go test -run XXX -bench ResolveMany100k -benchtime 1x -timeout 30m ./keystore/postgres/
func BenchmarkResolveMany100k(b *testing.B) {
	n := 100_000
	if v := os.Getenv("KEYSTORE_BULK_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer() // starting the server is not the benchmark
	base := pgtest.URL(b, "the PostgreSQL bulk benchmark")
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		u := pgtest.FreshSchema(b, base)
		s, err := postgres.Open(ctx, u, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO guard_keys (namespace, key, state, attempt, owner, result_ref, retryable,
				reason, created_at, updated_at, history)
			SELECT 'crm-contacts', 'lead_' || substr(md5(i::text), 1, 16), 'unknown', 1, 'n8n LeadCrm exec ' || i, '', false,
				'outcome_unknown', now() - interval '1 hour', now() - interval '1 hour',
				'[{"at":"2026-12-01T09:00:00Z","event":"reserved","attempt":1},{"at":"2026-12-01T09:00:30Z","event":"unknown","attempt":1,"detail":"outcome_unknown"}]'
			FROM generate_series(1, $1::int) AS i`, n); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO guard_counts (namespace, state, shard, n)
			SELECT namespace, state, 0, count(*) FROM guard_keys GROUP BY namespace, state`); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `VACUUM ANALYZE guard_keys`); err != nil {
			b.Fatal(err)
		}
		req := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm-contacts", States: []keystore.State{keystore.StateUnknown}},
			Resolution: keystore.StateFailed, By: "ann@example.com", Note: "CRM incident 4711: retry after the fix", ID: "b-bench001"}
		b.StartTimer()
		t0 := time.Now()
		res, err := keystore.ResolveMany(ctx, s, req)
		took := time.Since(t0)
		b.StopTimer()
		if err != nil || res.Matched != n || res.Decided != n {
			b.Fatalf("bulk: %+v %v", res, err)
		}
		var named, events int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM guard_keys WHERE namespace = 'crm-contacts' AND state = 'failed'
				AND history->-1->>'by' = $1 AND history->-1->>'detail' LIKE 'bulk b-bench001, failed: %'`, req.By).Scan(&named); err != nil {
			b.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM guard_events WHERE kind = 'key_resolved' AND owner = $1`, req.By).Scan(&events); err != nil {
			b.Fatal(err)
		}
		if named != n || events != n {
			b.Fatalf("%d of %d keys name the bulk and the person; %d resolved events", named, n, events)
		}
		b.ReportMetric(took.Seconds(), "s/bulk")
		b.ReportMetric(float64(n)/took.Seconds(), "decided/s")
		conn.Close(ctx)
		s.Close()
	}
}
