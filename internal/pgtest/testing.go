package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// URL returns the PostgreSQL that t's tests run against:
// N8N_GUARD_PG_URL when it is set, otherwise a throwaway cluster that
// stops when t ends. Without server binaries it skips loudly, naming what,
// except under CI=true, where it fails: CI must never pass without running
// the PostgreSQL tests.
func URL(t testing.TB, what string) string {
	t.Helper()
	if base := os.Getenv("N8N_GUARD_PG_URL"); base != "" {
		return base
	}
	c, err := Start(Options{})
	if errors.Is(err, ErrNoPostgres) && os.Getenv("CI") != "true" {
		msg := "SKIPPING " + what + ": " + err.Error() + " (or set N8N_GUARD_PG_URL)"
		fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
		t.Skip(msg)
	}
	if err != nil {
		t.Fatalf("start a throwaway PostgreSQL for %s: %v", what, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the throwaway PostgreSQL: %v", err)
		}
	})
	return c.URL
}

var schemaSeq atomic.Int64

// FreshSchema returns a URL on an empty schema of its own on base, dropped
// when t ends, so that each test starts on empty tables.
func FreshSchema(t testing.TB, base string) string {
	t.Helper()
	name := fmt.Sprintf("guard_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	u, err := NewSchema(context.Background(), base, name)
	if err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return // the cluster is gone with its schemas
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	return u
}
