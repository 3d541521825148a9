package console_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"net/url"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// The console's pages on the PostgreSQL store with a million keys, loaded
// with one INSERT … SELECT (the same mix as the bbolt benchmark: one key in
// 200 unknown, one in 200 failed, owners of 100 keys, three namespaces):
//
//	go test -run XXX -bench ConsolePostgres -benchtime 100x -timeout 30m ./api/console/
func BenchmarkConsolePostgres(b *testing.B) {
	n := benchKeys(b)
	u := pgtest.FreshSchema(b, pgtest.URL(b, "the console's PostgreSQL benchmark"))
	ctx := context.Background()
	store, err := postgres.Open(ctx, u, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO guard_keys (namespace, key, state, attempt, owner, result_ref, retryable,
			reason, created_at, updated_at, expires_at, history)
		SELECT (ARRAY['crm-contacts', 'bookings', 'invoices'])[i % 3 + 1], 'evt_' || substr(md5(i::text), 1, 16),
			CASE i % 200 WHEN 7 THEN 'unknown' WHEN 11 THEN 'failed' ELSE 'completed' END, 1, 'n8n exec ' || (i / 100),
			'crm-' || i, i % 200 = 11, CASE i % 200 WHEN 7 THEN 'outcome_unknown' WHEN 11 THEN 'destination_failed' ELSE '' END,
			now() - interval '1 day', now() - make_interval(secs => n - i),
			CASE WHEN i % 200 = 7 THEN NULL ELSE now() + interval '30 days' END,
			'[{"at":"2026-11-30T09:00:00Z","event":"reserved","attempt":1}]'
		FROM generate_series(1, $1::int) AS i, (SELECT $1::int AS n) AS c`, n); err != nil {
		b.Fatal(err)
	}
	// The rows bypassed the store: count them the way migration 3 counts
	// the keys of an older database.
	if _, err := conn.Exec(ctx, `INSERT INTO guard_counts (namespace, state, shard, n)
		SELECT namespace, state, 0, count(*) FROM guard_keys GROUP BY namespace, state`); err != nil {
		b.Fatal(err)
	}
	// VACUUM as autovacuum would have by now on a table this size.
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE guard_keys`); err != nil {
		b.Fatal(err)
	}
	s, stop, err := serve(store)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	c := client(b)
	resp := postForm(b, c, s.url+"/ui/signin", url.Values{"token": {actToken}})
	resp.Body.Close()
	sum := md5.Sum([]byte(strconv.Itoa(4242)))
	exactKey := "evt_" + hex.EncodeToString(sum[:])[:16] // namespace of 4242: 4242 % 3 = 0
	for _, page := range []struct{ name, path string }{
		{"Overview", "/ui"},
		{"SearchPrefix", "/ui/keys?search=1&namespace=bookings&key=evt_3a&match=prefix"},
		{"SearchExact", "/ui/keys?" + url.Values{"search": {"1"}, "namespace": {"crm-contacts"}, "key": {exactKey}, "match": {"exact"}}.Encode()},
		{"SearchOwner", "/ui/keys?search=1&owner=n8n+exec+4242"},
		{"SearchUnknown", "/ui/keys?search=1&state=unknown"},
		{"SearchCompletedInNamespace", "/ui/keys?search=1&namespace=invoices&state=completed"},
	} {
		b.Run(page.name, func(b *testing.B) { benchPageOn(b, s, c, page.path) })
	}
}
