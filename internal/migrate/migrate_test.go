package migrate_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/n8n-guard/n8n-guard/internal/migrate"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
)

func files(m map[string]string) fstest.MapFS {
	out := fstest.MapFS{}
	for name, sql := range m {
		out[name] = &fstest.MapFile{Data: []byte(sql)}
	}
	return out
}

func TestRun(t *testing.T) {
	base := pgtest.URL(t, "the migration runner tests")
	ctx := context.Background()
	pool := func(t *testing.T) *pgxpool.Pool {
		p, err := pgxpool.New(ctx, pgtest.FreshSchema(t, base))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	schema := func(m map[string]string) migrate.Schema {
		return migrate.Schema{Name: "test", Files: files(m), Table: "test_migrations", Lock: 42}
	}
	one := map[string]string{"0001_a.sql": "CREATE TABLE a (x int)"}
	two := map[string]string{"0001_a.sql": "CREATE TABLE a (x int)", "0002_b.sql": "CREATE TABLE b (y int)"}
	applied := func(t *testing.T, p *pgxpool.Pool) int {
		var n int
		if err := p.QueryRow(ctx, "SELECT count(*) FROM test_migrations").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("in order, each once", func(t *testing.T) {
		p := pool(t)
		for _, m := range []map[string]string{one, two, two} {
			if err := migrate.Run(ctx, p, schema(m), nil); err != nil {
				t.Fatal(err)
			}
		}
		if n := applied(t, p); n != 2 {
			t.Fatalf("%d versions recorded, want 2", n)
		}
	})
	t.Run("a failing file changes nothing", func(t *testing.T) {
		p := pool(t)
		bad := map[string]string{"0001_a.sql": "CREATE TABLE a (x int)", "0002_b.sql": "CREATE TABLE nonsense ("}
		if err := migrate.Run(ctx, p, schema(bad), nil); err == nil || !strings.Contains(err.Error(), "0002_b.sql") {
			t.Fatalf("want an error naming the file, got %v", err)
		}
		var exists bool
		if err := p.QueryRow(ctx, "SELECT to_regclass('a') IS NOT NULL").Scan(&exists); err != nil || exists {
			t.Fatalf("table a exists after a failed run: %v %v", exists, err)
		}
	})
	t.Run("a gap in the versions is refused", func(t *testing.T) {
		gap := map[string]string{"0001_a.sql": "SELECT 1", "0003_c.sql": "SELECT 1"}
		if err := migrate.Run(ctx, pool(t), schema(gap), nil); err == nil || !strings.Contains(err.Error(), "without gaps") {
			t.Fatalf("want a gap refused, got %v", err)
		}
	})
	t.Run("a badly named file is refused", func(t *testing.T) {
		bad := map[string]string{"first.sql": "SELECT 1"}
		if err := migrate.Run(ctx, pool(t), schema(bad), nil); err == nil || !strings.Contains(err.Error(), "NNNN_name.sql") {
			t.Fatalf("want the name refused, got %v", err)
		}
	})
	t.Run("a newer schema is refused", func(t *testing.T) {
		p := pool(t)
		if err := migrate.Run(ctx, p, schema(two), nil); err != nil {
			t.Fatal(err)
		}
		if err := migrate.Run(ctx, p, schema(one), nil); err == nil || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("want a newer schema refused, got %v", err)
		}
	})
}
