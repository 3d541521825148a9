package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
)

// newShared gives the shared-store cases handles on one fresh schema (or
// database, through PgBouncer) and a holder whose transactions run on a
// connection of their own, as another replica's would.
func (pg *pgEnv) newShared(t *testing.T, clock keystore.Clock, pol keystore.Policies) (storetest.Opener, storetest.Holder) {
	u := pg.freshSchema(t)
	open := func() keystore.Store { return openPostgres(t, u, postgres.Options{Clock: clock, Policies: pol}) }
	return open, pgHolder{url: u}
}

type pgHolder struct{ url string }

func (h pgHolder) HoldPace(t *testing.T, dest string) storetest.Hold {
	return h.hold(t, "guard_resume_pace", `SELECT 1 FROM guard_resume_pace WHERE destination = $1 FOR UPDATE`, dest)
}

func (h pgHolder) HoldBulk(t *testing.T, id string) storetest.Hold {
	return h.hold(t, "guard_bulk", `INSERT INTO guard_bulk (id, content, created_at) VALUES ($1, '\x00', now())`, id)
}

// hold runs sql in a transaction it keeps open; Waiting counts the other
// sessions of this database waiting for a lock in a statement on table.
func (h pgHolder) hold(t *testing.T, table, sql, arg string) storetest.Hold {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, h.url)
	if err != nil {
		t.Fatal(err)
	}
	watch, err := pgx.Connect(ctx, h.url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(ctx, sql, arg)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("hold %s %s: %v (%d rows)", table, arg, err, tag.RowsAffected())
	}
	return storetest.Hold{
		Waiting: func() int {
			var n int
			err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, table).Scan(&n)
			if err != nil {
				t.Error(err)
			}
			return n
		},
		Release: func() {
			if err := tx.Rollback(ctx); err != nil {
				t.Error(err)
			}
			conn.Close(ctx)
			watch.Close(ctx)
		},
	}
}
