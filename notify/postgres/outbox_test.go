package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/outboxtest"
	"github.com/n8n-guard/n8n-guard/notify/postgres"
)

// The conformance suite on PostgreSQL (N8N_GUARD_PG_URL, or a throwaway
// cluster; skips loudly without server binaries, except under CI=true).
func TestOutbox(t *testing.T) {
	base := pgtest.URL(t, "the PostgreSQL outbox conformance suite")
	outboxtest.Run(t, func(t *testing.T) notify.Outbox { return open(t, pgtest.FreshSchema(t, base)) })
}

// The same through PgBouncer in transaction pooling mode (a database per
// test; see keystore/postgres's TestPostgresThroughPgBouncer).
func TestOutboxThroughPgBouncer(t *testing.T) {
	base := pgtest.URL(t, "the PostgreSQL outbox conformance suite through PgBouncer")
	via := pgtest.BouncerURL(t, base, "the PostgreSQL outbox conformance suite through PgBouncer")
	outboxtest.Run(t, func(t *testing.T) notify.Outbox { return open(t, pgtest.FreshDatabase(t, base, via)) })
}

func open(t *testing.T, url string) notify.Outbox {
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	o, err := postgres.New(context.Background(), pool, postgres.Options{Replica: "conformance"})
	if err != nil {
		t.Fatal(err)
	}
	return o
}
