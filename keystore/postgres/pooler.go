package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// checkPooler refuses a pool whose connections go through a pooler in
// transaction mode (PgBouncer's pool_mode=transaction) while pgx prepares
// statements. There, each transaction may run on another server session,
// and a statement pgx prepared on one is missing on the next ("prepared
// statement … does not exist"), or one of the same name is already there
// ("… already exists"): errors that would come and go with the load,
// long after start. With default_query_exec_mode=exec or simple_protocol
// in the URL pgx prepares nothing, and the rest of n8n-guard keeps no
// session state (its advisory lock is transaction-scoped; no LISTEN, no
// SET), so transaction pooling is then safe.
//
// A session is pooled when its statements run in more than one server
// process: a holds a session, b takes a transaction; a's server process,
// free between its statements, goes to b, or a's next statement runs in
// another one. Connected directly (or in session mode) a keeps its
// process. The probe sends no prepared statement itself.
func checkPooler(ctx context.Context, pool *pgxpool.Pool) error {
	switch pool.Config().ConnConfig.DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return nil // nothing prepared, nothing to lose
	}
	if pool.Config().MaxConns < 2 {
		return nil // the probe needs two connections; a pool of one is checked by nobody
	}
	a, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer a.Release()
	b, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer b.Release()
	const pid = `SELECT pg_backend_pid()`
	simple := pgx.QueryExecModeSimpleProtocol
	var first, taken, second int32
	if err := a.QueryRow(ctx, pid, simple).Scan(&first); err != nil {
		return err
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := tx.QueryRow(ctx, pid, simple).Scan(&taken); err != nil {
		return err
	}
	if err := a.QueryRow(ctx, pid, simple).Scan(&second); err != nil {
		return err
	}
	if taken == first || second != first {
		return fmt.Errorf("the database is reached through a connection pooler in transaction mode (one client session ran in two server processes, %d and %d): "+
			"pgx's prepared statements would be lost between transactions; add default_query_exec_mode=exec to the URL (docs/postgres.md, PgBouncer)",
			first, other(first, taken, second))
	}
	return nil
}

// other returns whichever of b and c is not a.
func other(a, b, c int32) int32 {
	if b != a {
		return b
	}
	return c
}
