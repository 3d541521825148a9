package keystore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
)

// The PostgreSQL tests run against N8N_GUARD_PG_URL when it is set, and
// otherwise against a throwaway cluster that TestPostgres starts and stops
// around its subtests. Without server binaries they skip loudly, except
// under CI=true, where they fail: CI must never pass without running them.
func TestPostgres(t *testing.T) {
	base := os.Getenv("N8N_GUARD_PG_URL")
	if base == "" {
		c, err := pgtest.Start(pgtest.Options{})
		if errors.Is(err, pgtest.ErrNoPostgres) && os.Getenv("CI") != "true" {
			msg := "SKIPPING the PostgreSQL store tests: " + err.Error() + " (or set N8N_GUARD_PG_URL)"
			fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
			t.Skip(msg)
		}
		if err != nil {
			t.Fatalf("start a throwaway PostgreSQL: %v", err)
		}
		t.Cleanup(func() {
			if err := c.Stop(); err != nil {
				t.Errorf("stop the throwaway PostgreSQL: %v", err)
			}
		})
		base = c.URL
	}
	pg := &pgEnv{base: base}
	t.Run("conformance", func(t *testing.T) { storetest.Run(t, pg.newStore) })
	t.Run("two processes", pg.testTwoProcesses)
	t.Run("database clock", pg.testDatabaseClock)
	t.Run("migrations", pg.testMigrations)
}

// pgEnv is the database the PostgreSQL tests share; each test gets a
// fresh schema of its own on it.
type pgEnv struct{ base string }

var schemaSeq atomic.Int64

// freshSchema returns a URL on an empty schema of its own, dropped when
// the test ends.
func (pg *pgEnv) freshSchema(t *testing.T) string {
	t.Helper()
	base := pg.base
	name := fmt.Sprintf("guard_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	u, err := pgtest.NewSchema(context.Background(), base, name)
	if err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	return u
}

func openPostgres(t *testing.T, url string, opts keystore.PostgresOptions) *keystore.PostgresStore {
	t.Helper()
	s, err := keystore.OpenPostgres(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	return s
}

func (pg *pgEnv) newStore(t *testing.T, clock keystore.Clock, pol keystore.Policies) storetest.Opener {
	u := pg.freshSchema(t)
	return func() keystore.Store {
		return openPostgres(t, u, keystore.PostgresOptions{Clock: clock, Policies: pol})
	}
}

// With no clock given, leases are judged by the database's clock.
func (pg *pgEnv) testDatabaseClock(t *testing.T) {
	ctx := context.Background()
	u := pg.freshSchema(t)
	s := openPostgres(t, u, keystore.PostgresOptions{})
	defer s.Close()
	var dbNow time.Time
	if err := s.Pool().QueryRow(ctx, "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Lease: time.Second})
	if err != nil || r.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	if d := r.Record.CreatedAt.Sub(dbNow); d < -time.Millisecond || d > 5*time.Second {
		t.Fatalf("created_at %v is not the database's time %v", r.Record.CreatedAt, dbNow)
	}
	// The database's clock moves the lease on with no clock in the process.
	time.Sleep(1100 * time.Millisecond)
	r, err = s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1"})
	if err != nil || r.Outcome != keystore.OutcomeStateUnknown {
		t.Fatalf("reserve after the lease: %+v %v", r.Outcome, err)
	}
	st, err := s.Sweep(ctx)
	if err != nil || st.LeasesExpired != 0 {
		t.Fatalf("sweep: %+v %v", st, err)
	}
	if _, err := s.Destinations(ctx); err != nil {
		t.Fatal(err)
	}
}

// Migrations run once; several processes opening at once wait for each
// other; a schema newer than the binary is refused.
func (pg *pgEnv) testMigrations(t *testing.T) {
	ctx := context.Background()
	u := pg.freshSchema(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := keystore.OpenPostgres(ctx, u, keystore.PostgresOptions{})
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
	s := openPostgres(t, u, keystore.PostgresOptions{})
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM guard_schema_migrations").Scan(&n); err != nil || n != 1 {
		t.Fatalf("migrations recorded: %d %v", n, err)
	}
	if _, err := s.Pool().Exec(ctx, "INSERT INTO guard_schema_migrations (version, name) VALUES (99, 'future')"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := keystore.OpenPostgres(ctx, u, keystore.PostgresOptions{}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a newer schema must be refused, got %v", err)
	}
	if _, err := keystore.OpenPostgres(ctx, "postgres://user:secret@", keystore.PostgresOptions{}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a bad URL must be refused without quoting it: %v", err)
	}
}
