package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// now returns the time a read or a sweep judges by: the injected clock,
// or the database's.
func (s *Store) now(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (time.Time, error) {
	if s.clock != nil {
		return s.clock().UTC().Truncate(time.Millisecond), nil
	}
	var now time.Time
	if err := q.QueryRow(ctx, pgClock).Scan(&now); err != nil {
		return time.Time{}, err
	}
	return now.UTC().Truncate(time.Millisecond), nil
}

// Counts implements Store: the sums of guard_counts, which every write
// keeps (a million keys are not counted row by row).
func (s *Store) Counts(ctx context.Context) (map[string]map[keystore.State]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT namespace, state, sum(n) FROM guard_counts GROUP BY namespace, state HAVING sum(n) <> 0`)
	if err != nil {
		return nil, s.dbErr("counts", err)
	}
	defer rows.Close()
	out := map[string]map[keystore.State]int{}
	for rows.Next() {
		var ns, st string
		var n int64
		if err := rows.Scan(&ns, &st, &n); err != nil {
			return nil, s.dbErr("counts", err)
		}
		if out[ns] == nil {
			out[ns] = map[keystore.State]int{}
		}
		out[ns][keystore.State(st)] = int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("counts", err)
	}
	return out, nil
}

// Destinations implements Store: every breaker with a row, and every
// configured destination (closed until something happens to it).
func (s *Store) Destinations(ctx context.Context) ([]keystore.Breaker, error) {
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return nil, s.dbErr("destinations", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT destination, `+pgBreakerCols+` FROM guard_breakers ORDER BY destination`)
	if err != nil {
		return nil, s.dbErr("destinations", err)
	}
	defer rows.Close()
	var out []keystore.Breaker
	for rows.Next() {
		var dest string
		b, _, err := scanBreaker(prefixRow{rows, []any{&dest}}, "")
		if err != nil {
			return nil, s.dbErr("destinations", err)
		}
		b.Destination = dest
		out = append(out, b.View(now))
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("destinations", err)
	}
	return s.policies.WithConfigured(out), nil
}

// Events implements Store.
func (s *Store) Events(ctx context.Context, after uint64, limit int) ([]keystore.Event, error) {
	limit = keystore.EventLimit(limit)
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM guard_events WHERE seq > $1 ORDER BY seq LIMIT $2`, int64(after), limit)
	if err != nil {
		return nil, s.dbErr("events", err)
	}
	return s.scanEvents(rows)
}

// Sweep implements Store. Each pass takes at most sweepBatch rows per
// transaction, oldest first through the partial indexes, and skips rows a
// request holds locked (SKIP LOCKED): a sweep never makes a reserve wait,
// and two replicas sweeping at once share the work instead of colliding.
func (s *Store) Sweep(ctx context.Context) (keystore.SweepStats, error) {
	var st keystore.SweepStats
	// A damaged row is never decided on; the pass over leases goes on past
	// it (after), so damaged rows cannot fill its batches for ever.
	var after leaseRef
	full := func(do func(context.Context) (int, error)) func(context.Context) (int, bool, error) {
		return func(ctx context.Context) (int, bool, error) {
			n, err := do(ctx)
			return n, n >= s.sweepBatch, err
		}
	}
	passes := []struct {
		do    func(ctx context.Context) (n int, more bool, err error)
		count *int
	}{
		{func(ctx context.Context) (int, bool, error) { return s.sweepLeases(ctx, &after) }, &st.LeasesExpired},
		{full(s.sweepExpired), &st.Expired},
		{full(s.sweepEvents), &st.Events},
	}
	if err := s.foldActivity(ctx); err != nil {
		return st, s.dbErr("sweep", err)
	}
	for _, p := range passes {
		for {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			start := time.Now()
			n, more, err := p.do(ctx)
			st.LongestTx = max(st.LongestTx, time.Since(start))
			*p.count += n
			if err != nil {
				return st, s.dbErr("sweep", err)
			}
			if !more {
				break
			}
		}
	}
	return st, nil
}

// sweepLeases moves reservations whose lease ran out to unknown, through
// the same decision a reserve makes. Namespaces that reclaim are left
// alone: there the next reserve takes the key over.
// more says whether a full batch was read (damaged rows included: the
// next batch starts after them).
func (s *Store) sweepLeases(ctx context.Context, after *leaseRef) (n int, more bool, err error) {
	reclaim := []string{} // not nil: NULL would exclude every row
	for ns, p := range s.policies.Namespaces {
		if p.OnLeaseExpiry == keystore.ExpireReclaim {
			reclaim = append(reclaim, ns)
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	now, err := s.now(ctx, tx)
	if err != nil {
		return 0, false, err
	}
	sql := `SELECT namespace, key, lease_expires_at, ` + pgKeyRead + ` FROM guard_keys
		WHERE state = 'reserved' AND lease_expires_at <= $1 AND NOT (namespace = ANY($2))`
	args := []any{now, reclaim, s.sweepBatch}
	if after.ns != "" {
		sql += ` AND (lease_expires_at, namespace, key) > ($4, $5, $6)`
		args = append(args, after.at, after.ns, after.key)
	}
	rows, err := tx.Query(ctx, sql+` ORDER BY lease_expires_at, namespace, key LIMIT $3 FOR UPDATE SKIP LOCKED`, args...)
	if err != nil {
		return 0, false, err
	}
	type dueRow struct {
		cur     *keystore.Record
		version int64
	}
	var due []dueRow
	read := 0
	for rows.Next() {
		var ns, key string
		var at time.Time
		r, v, err := scanRecord(prefixRow{rows, []any{&ns, &key, &at}}, "", "")
		read++
		*after = leaseRef{at, ns, key}
		if errs.CodeOf(err) == errs.RecordDamaged {
			s.noteDamage(err) // never decided on: its lease is left as it is
			continue
		}
		if err != nil {
			rows.Close()
			return 0, false, err
		}
		due = append(due, dueRow{r, v})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, err
	}
	b := &pgx.Batch{}
	for _, d := range due {
		step, expired := keystore.DecideLeaseExpiry(d.cur, s.policies.Namespace(d.cur.Namespace), now)
		if !expired {
			continue
		}
		if err := queueRecord(b, d.cur, d.version, step.Record); err != nil {
			return 0, false, err
		}
		for _, ev := range step.Events {
			queueEvent(b, ev)
		}
		n++
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return 0, false, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, err
	}
	if n > 0 {
		s.commits.Notify() // keys went unknown: their alerts, their checks
	}
	return n, read == s.sweepBatch, nil
}

// leaseRef is where the pass over expired leases goes on from.
type leaseRef struct {
	at      time.Time
	ns, key string
}

// sweepExpired deletes finished records past their retention.
func (s *Store) sweepExpired(ctx context.Context) (int, error) {
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return 0, err
	}
	// The deleted keys leave guard_counts in the same statement (on shard
	// 0: a count is the sum of its shards).
	var n int
	err = s.pool.QueryRow(ctx, `WITH due AS (
			SELECT namespace, key FROM guard_keys
			WHERE expires_at <= $1 AND state IN ('completed', 'failed')
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED),
		gone AS (
			DELETE FROM guard_keys k USING due WHERE k.namespace = due.namespace AND k.key = due.key
			RETURNING k.namespace, k.state),
		counted AS (
			INSERT INTO guard_counts (namespace, state, shard, n)
			SELECT namespace, state, 0, -count(*) FROM gone GROUP BY namespace, state ORDER BY state
			ON CONFLICT (namespace, state, shard) DO UPDATE SET n = guard_counts.n + EXCLUDED.n)
		SELECT count(*) FROM gone`, now, s.sweepBatch).Scan(&n)
	return n, err
}

// sweepEvents deletes events older than EventRetention.
func (s *Store) sweepEvents(ctx context.Context) (int, error) {
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM guard_events WHERE seq IN (
		SELECT seq FROM guard_events WHERE at <= $1 ORDER BY at LIMIT $2)`, now.Add(-keystore.EventRetention), s.sweepBatch)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
