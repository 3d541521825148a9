package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// URL returns the PostgreSQL that t's tests run against:
// N8N_GUARD_PG_URL when it is set, otherwise the test process's throwaway
// cluster (processCluster), gone when the process is. Without server
// binaries it skips loudly, naming what, except under CI=true, where it
// fails: CI must never pass without running the PostgreSQL tests.
func URL(t testing.TB, what string) string {
	t.Helper()
	if base := os.Getenv("N8N_GUARD_PG_URL"); base != "" {
		return base
	}
	c, err := processCluster()
	if errors.Is(err, ErrNoPostgres) && os.Getenv("CI") != "true" {
		msg := "SKIPPING " + what + ": " + err.Error() + " (or set N8N_GUARD_PG_URL)"
		fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
		t.Skip(msg)
	}
	if err != nil {
		t.Fatalf("start a throwaway PostgreSQL for %s: %v", what, err)
	}
	return c.URL
}

// shared is the test process's throwaway cluster: started by the first
// URL, used by every test after it (each on a schema or database of its
// own: FreshSchema, FreshDatabase), stopped and removed by the watch
// Start runs once the process is gone. One cluster per process instead
// of one per test: initdb and start take ~10 s on a busy 2-core machine,
// several times per package.
var shared struct {
	mu sync.Mutex
	c  *Cluster
}

// processCluster is the shared cluster, started on first use; a failed
// start is tried again by the next test.
func processCluster() (*Cluster, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c != nil {
		return shared.c, nil
	}
	c, err := Start(Options{})
	if err != nil {
		return nil, err
	}
	shared.c = c
	return c, nil
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
		// An error: the cluster is gone with its schemas.
		execAll(context.Background(), base, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	return u
}

// BouncerURL returns the URL of a PgBouncer in transaction pooling mode in
// front of base: N8N_GUARD_PGBOUNCER_URL when it is set, otherwise one
// started for t (StartBouncer) and stopped when t ends. Without the
// pgbouncer binary it skips loudly, naming what, except under CI=true,
// where it fails.
func BouncerURL(t testing.TB, base, what string) string {
	t.Helper()
	if u := os.Getenv("N8N_GUARD_PGBOUNCER_URL"); u != "" {
		return u
	}
	b, err := StartBouncer(base)
	if errors.Is(err, ErrNoPgBouncer) && os.Getenv("CI") != "true" {
		msg := "SKIPPING " + what + ": " + err.Error() + " (or set N8N_GUARD_PGBOUNCER_URL)"
		fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
		t.Skip(msg)
	}
	if err != nil {
		t.Fatalf("start PgBouncer for %s: %v", what, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("PgBouncer's log:\n%s", b.Log())
		}
		if err := b.Stop(); err != nil {
			t.Errorf("stop PgBouncer: %v", err)
		}
	})
	return b.URL
}

var databaseSeq atomic.Int64

// FreshDatabase returns a URL through via (a PgBouncer in front of
// direct) on an empty database of its own, dropped when t ends
// (NewDatabase).
func FreshDatabase(t testing.TB, direct, via string) string {
	t.Helper()
	name := fmt.Sprintf("guard_test_%d_%d", os.Getpid(), databaseSeq.Add(1))
	u, err := NewDatabase(context.Background(), direct, via, name)
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		// FORCE: PgBouncer may still hold server connections to it. An
		// error: the cluster is gone with its databases.
		execAll(context.Background(), direct, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return u
}

// templates are the databases FreshDatabaseFrom copies: made once per
// test process and name.
var templates struct {
	mu   sync.Mutex
	made map[string]bool
}

// FreshDatabaseFrom is FreshDatabase on a copy of the template database
// (CREATE DATABASE ... TEMPLATE), which prepare fills once per process and
// name, given the template's direct URL; prepare must close its
// connections (a template in use cannot be copied). A copy is cheaper
// than preparing each test's database again (a store's migrations: about
// half a second a test on a busy 2-core machine).
func FreshDatabaseFrom(t testing.TB, direct, via, template string, prepare func(url string) error) string {
	t.Helper()
	ctx := context.Background()
	// Its own per process: processes sharing N8N_GUARD_PG_URL do not
	// prepare one template at once (there it is left behind; the
	// throwaway cluster goes with it).
	template = fmt.Sprintf("%s_%d", template, os.Getpid())
	templates.mu.Lock()
	if !templates.made[template] {
		tu, err := databaseURL(direct, template)
		if err == nil {
			err = execAll(ctx, direct, "DROP DATABASE IF EXISTS "+pgx.Identifier{template}.Sanitize()+" WITH (FORCE)", "CREATE DATABASE "+pgx.Identifier{template}.Sanitize())
		}
		if err == nil {
			err = prepare(tu)
		}
		if err != nil {
			templates.mu.Unlock()
			t.Fatalf("prepare the template database %s: %v", template, err)
		}
		if templates.made == nil {
			templates.made = map[string]bool{}
		}
		templates.made[template] = true
	}
	templates.mu.Unlock()

	name := fmt.Sprintf("guard_test_%d_%d", os.Getpid(), databaseSeq.Add(1))
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	// A backend of prepare's (or of a copy made at the same moment) may
	// still be leaving the template: PostgreSQL refuses the copy until it
	// is gone (55006). Tried again until then; the limit only turns a
	// template held for good into a failure.
	for giveUp := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		err := execAll(ctx, direct, create)
		if err == nil {
			break
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(giveUp) {
			t.Fatalf("create database from %s: %v", template, err)
		}
	}
	t.Cleanup(func() {
		execAll(context.Background(), direct, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	u, err := url.Parse(via)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	out, err := WithParam(u.String(), "default_query_exec_mode", "exec")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// databaseURL is base's URL on another database.
func databaseURL(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}
