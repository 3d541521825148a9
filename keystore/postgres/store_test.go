package postgres_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
)

// The PostgreSQL tests run against N8N_GUARD_PG_URL or a throwaway
// cluster (pgtest.URL: a loud skip without server binaries, a failure
// under CI=true).
func TestPostgres(t *testing.T) {
	// Beside the PgBouncer run: each on schemas or databases of its own in
	// the process's one cluster, so together they take the longer one's
	// time, not the sum (go test's default 10 minutes on a busy machine).
	t.Parallel()
	base := pgtest.URL(t, "the PostgreSQL store tests")
	pg := &pgEnv{fresh: func(t *testing.T) string { return pgtest.FreshSchema(t, base) }}
	pg.run(t)
}

// The same tests through PgBouncer 1.18 in transaction pooling mode,
// where every transaction may run on another server connection: no
// prepared statement, session lock or setting may be assumed to survive
// it. Each test gets a database of its own (PgBouncer does not pass a
// search_path on), reached with default_query_exec_mode=exec.
func TestPostgresThroughPgBouncer(t *testing.T) {
	t.Parallel() // beside TestPostgres
	base := pgtest.URL(t, "the PostgreSQL store tests through PgBouncer")
	via := pgtest.BouncerURL(t, base, "the PostgreSQL store tests through PgBouncer")
	pg := &pgEnv{fresh: func(t *testing.T) string { return pgtest.FreshDatabase(t, base, via) },
		// The conformance cases start on a copy of a migrated database:
		// their store's Open finds the migrations done, through PgBouncer.
		migrated: func(t *testing.T) string {
			return pgtest.FreshDatabaseFrom(t, base, via, "guard_migrated", func(u string) error {
				s, err := postgres.Open(context.Background(), u, postgres.Options{})
				if err != nil {
					return err
				}
				return s.Close()
			})
		}}
	pg.run(t)
	t.Run("prepared statements refused at start", func(t *testing.T) {
		u := strings.Replace(pg.fresh(t), "default_query_exec_mode=exec", "default_query_exec_mode=cache_statement", 1)
		_, err := postgres.Open(context.Background(), u, postgres.Options{})
		if err == nil || !strings.Contains(err.Error(), "pooler in transaction mode") || !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
			t.Fatalf("open through PgBouncer with prepared statements: %v", err)
		}
	})
}

func (pg *pgEnv) run(t *testing.T) {
	t.Run("conformance", func(t *testing.T) { storetest.Run(t, pg.newStore) })
	t.Run("shared by two guards", func(t *testing.T) { storetest.RunShared(t, pg.newShared) })
	t.Run("two processes", pg.testTwoProcesses)
	t.Run("database clock", pg.testDatabaseClock)
	t.Run("migrations", pg.testMigrations)
	t.Run("stage migration from version 19", pg.testStageMigration)
	t.Run("stage of a row an older n8n-guard writes", pg.testStageOfAnOlderWrite)
	t.Run("checksums", pg.testChecksums)
	t.Run("park checksums", pg.testParkChecksums)
	t.Run("damaged records", func(t *testing.T) { storetest.RunDamage(t, pg.newStore, tamperResultRef) })
	t.Run("the sweep goes on past a batch of damaged rows", pg.testSweepPastDamagedRows)
	t.Run("a damaged event", pg.testDamagedEvent)
}

// Damaged rows at the head of a sweep pass (the expired leases, the
// finished rows past their retention) fill whole sweep batches (here of
// one row): the sweep goes on past them and decides the intact rows
// behind, leaving the damaged ones as they are.
func (pg *pgEnv) testSweepPastDamagedRows(t *testing.T) {
	for _, c := range []struct {
		pass     string
		complete bool // the keys finished: their retention ends, not their lease
		swept    func(keystore.SweepStats) int
		intact   keystore.Outcome
	}{
		{"expired leases", false, func(st keystore.SweepStats) int { return st.LeasesExpired }, keystore.OutcomeFound},
		{"retention", true, func(st keystore.SweepStats) int { return st.Expired }, keystore.OutcomeAbsent},
	} {
		t.Run(c.pass, func(t *testing.T) {
			ctx := context.Background()
			clock := fakeclock.New()
			pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"crm": {Retention: time.Hour}}}
			s := openPostgres(t, pg.freshSchema(t), postgres.Options{Clock: clock.Now, SweepBatch: 1, Policies: pol})
			defer s.Close()
			for _, key := range []string{"damaged_1", "damaged_2", "intact_1", "intact_2"} {
				clock.Advance(time.Second) // leases and retentions run out in this order
				r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: key})
				if err != nil || r.Outcome != keystore.OutcomeAccepted {
					t.Fatalf("reserve %s: %+v %v", key, r, err)
				}
				if c.complete {
					if _, err := s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm", Key: key, Token: r.Token}); err != nil {
						t.Fatal(err)
					}
				}
			}
			tamperResultRef(t, s, "crm", "damaged_1")
			tamperResultRef(t, s, "crm", "damaged_2")
			clock.Advance(2 * time.Hour)
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a sweep that reads the same rows for ever fails here
			defer cancel()
			st, err := s.Sweep(sctx)
			if err != nil || c.swept(st) != 2 {
				t.Fatalf("sweep: %+v %v, want the 2 intact rows swept", st, err)
			}
			for _, key := range []string{"intact_1", "intact_2"} {
				r, err := s.Lookup(ctx, "crm", key)
				if err != nil || r.Outcome != c.intact || r.Record != nil && r.Record.State != keystore.StateUnknown {
					t.Fatalf("%s after the sweep: %+v %v", key, r, err)
				}
			}
			if _, err := s.Lookup(ctx, "crm", "damaged_1"); errs.CodeOf(err) != errs.RecordDamaged {
				t.Fatalf("the damaged row after the sweep: %v", err)
			}
		})
	}
}

// tamperResultRef damages the row of ns/key beneath the store: its
// result_ref changed with the checksum trigger off, as storage damage or
// a file-level copy gone wrong would (neither goes through triggers).
func tamperResultRef(t *testing.T, s keystore.Store, ns, key string) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.(*postgres.Store).Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, sql := range []string{
		`ALTER TABLE guard_keys DISABLE TRIGGER guard_keys_checksum`,
		`UPDATE guard_keys SET result_ref = result_ref || 'crm-contact-forged' WHERE namespace = $1 AND key = $2`,
		`ALTER TABLE guard_keys ENABLE TRIGGER guard_keys_checksum`,
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = []any{ns, key}
		}
		tag, err := tx.Exec(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if args != nil && tag.RowsAffected() != 1 {
			t.Fatalf("no row %s/%s", ns, key)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// pgEnv is the server the PostgreSQL tests share; fresh gives each test
// an empty schema or database of its own on it, migrated (nil: fresh) one
// whose migrations are done, for the tests of a store's behaviour.
type pgEnv struct{ fresh, migrated func(t *testing.T) string }

func (pg *pgEnv) freshSchema(t *testing.T) string { return pg.fresh(t) }

func openPostgres(t *testing.T, url string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	return s
}

func (pg *pgEnv) newStore(t *testing.T, clock keystore.Clock, pol keystore.Policies) storetest.Opener {
	u := pg.freshSchema
	if pg.migrated != nil {
		u = pg.migrated
	}
	return pg.opener(t, u(t), clock, pol)
}

func (pg *pgEnv) opener(t *testing.T, u string, clock keystore.Clock, pol keystore.Policies) storetest.Opener {
	return func() keystore.Store {
		return openPostgres(t, u, postgres.Options{Clock: clock, Policies: pol})
	}
}

// With no clock given, leases are judged by the database's clock.
func (pg *pgEnv) testDatabaseClock(t *testing.T) {
	ctx := context.Background()
	u := pg.freshSchema(t)
	s := openPostgres(t, u, postgres.Options{})
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
	testwait.For(t, "the database's clock past the lease", func() bool {
		err := s.Pool().QueryRow(ctx, "SELECT now()").Scan(&dbNow)
		return err == nil && dbNow.After(*r.Record.LeaseExpiresAt)
	})
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
			s, err := postgres.Open(ctx, u, postgres.Options{})
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
	s := openPostgres(t, u, postgres.Options{})
	var n int
	files, _ := filepath.Glob("migrations/*.sql")
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM guard_schema_migrations").Scan(&n); err != nil || n != len(files) || n == 0 {
		t.Fatalf("migrations recorded: %d %v, want %d", n, err, len(files))
	}
	if _, err := s.Pool().Exec(ctx, "INSERT INTO guard_schema_migrations (version, name) VALUES (99, 'future')"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := postgres.Open(ctx, u, postgres.Options{}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a newer schema must be refused, got %v", err)
	}
	if _, err := postgres.Open(ctx, "postgres://user:secret@", postgres.Options{}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a bad URL must be refused without quoting it: %v", err)
	}
}
