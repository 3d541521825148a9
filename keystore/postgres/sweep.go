package postgres

import (
	"context"
	"strings"
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
	return s.readEvents("events", int64(after), keystore.EventLimit(limit), func(after int64, n int) (pgx.Rows, error) {
		return s.pool.Query(ctx, `SELECT `+eventColumns+` FROM guard_events WHERE seq > $1 ORDER BY seq LIMIT $2`, after, n)
	})
}

// FoldActivity implements keystore.Driver.
func (s *Store) FoldActivity(ctx context.Context) error {
	if err := s.foldActivity(ctx); err != nil {
		return s.dbErr("sweep", err)
	}
	return nil
}

// SweepDue implements keystore.Driver. Each batch takes at most
// sweepBatch rows in one transaction, oldest first through the partial
// indexes, and skips rows a request holds locked (SKIP LOCKED): a sweep
// never makes a reserve wait, and two replicas sweeping at once share the
// work instead of colliding.
func (s *Store) SweepDue(ctx context.Context, op keystore.SweepOp) (b keystore.SweepBatch, err error) {
	start := time.Now()
	if op.Pass == keystore.SweepEvents {
		b.Changed, err = s.sweepEvents(ctx, op.Retention)
		b.More = b.Changed >= s.sweepBatch
	} else {
		b.Changed, b.More, b.Cursor, err = s.sweepKeys(ctx, op)
	}
	b.Took = time.Since(start)
	if err != nil {
		return keystore.SweepBatch{Took: b.Took}, s.dbErr("sweep", err)
	}
	return b, nil
}

// sweepKeys reads the due rows of op's pass after its cursor, locked, has
// op.Decide decide each and saves or deletes what it decided. A damaged
// row is never decided on; the pass goes on past it (the cursor), so
// damaged rows cannot fill its batches for ever. more says whether a full
// batch was read, damaged rows included.
func (s *Store) sweepKeys(ctx context.Context, op keystore.SweepOp) (n int, more bool, cursor string, err error) {
	col, where := "lease_expires_at", "state = 'reserved' AND lease_expires_at <= $1"
	if op.Pass == keystore.SweepRetention {
		col, where = "expires_at", "expires_at <= $1"
	}
	skip := append([]string{}, op.Skip...) // not nil: NULL would exclude every row
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, false, "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	now, err := s.now(ctx, tx)
	if err != nil {
		return 0, false, "", err
	}
	sql := `SELECT namespace, key, ` + col + `, ` + pgKeyRead + ` FROM guard_keys WHERE ` + where + ` AND NOT (namespace = ANY($2))`
	args := []any{now, skip, s.sweepBatch}
	if after, ok := parseSweepCursor(op.Cursor); ok {
		sql += ` AND (` + col + `, namespace, key) > ($4, $5, $6)`
		args = append(args, after.at, after.ns, after.key)
	}
	rows, err := tx.Query(ctx, sql+` ORDER BY `+col+`, namespace, key LIMIT $3 FOR UPDATE SKIP LOCKED`, args...)
	if err != nil {
		return 0, false, "", err
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
		cursor = sweepRef{at, ns, key}.String()
		if errs.CodeOf(err) == errs.RecordDamaged {
			s.noteDamage(err) // never decided on: left as it is
			continue
		}
		if err != nil {
			rows.Close()
			return 0, false, "", err
		}
		due = append(due, dueRow{r, v})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, "", err
	}
	b := &pgx.Batch{}
	var events []keystore.Event
	var goneNS, goneKeys []string
	var saved []keystore.CommittedKey
	for _, d := range due {
		step, gone := op.Decide(d.cur, now)
		switch {
		case gone:
			goneNS, goneKeys = append(goneNS, d.cur.Namespace), append(goneKeys, d.cur.Key)
		case step.Record != nil:
			if err := queueRecord(b, d.cur, d.version, step.Record); err != nil {
				return 0, false, "", err
			}
			events = append(events, step.Events...)
			saved = append(saved, step.Committed()...)
		default:
			continue
		}
		n++
	}
	if len(goneKeys) > 0 {
		// The deleted keys leave guard_counts in the same statement (on
		// shard 0: a count is the sum of its shards).
		b.Queue(`WITH gone AS (
				DELETE FROM guard_keys k USING unnest($1::text[], $2::text[]) AS d(namespace, key)
				WHERE k.namespace = d.namespace AND k.key = d.key
				RETURNING k.namespace, k.state)
			INSERT INTO guard_counts (namespace, state, shard, n)
			SELECT namespace, state, 0, -count(*) FROM gone GROUP BY namespace, state ORDER BY state
			ON CONFLICT (namespace, state, shard) DO UPDATE SET n = guard_counts.n + EXCLUDED.n`, goneNS, goneKeys)
	}
	for _, ev := range events { // after every row, as a bulk batch queues them
		queueEvent(b, ev)
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return 0, false, "", err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, "", err
	}
	if len(saved) > 0 {
		s.commits.Notify(saved...) // keys went unknown: their alerts, their checks
	}
	return n, read == s.sweepBatch, cursor, nil
}

// sweepRef is where a sweep pass goes on from: the due time, namespace
// and key of the last row it read.
type sweepRef struct {
	at      time.Time
	ns, key string
}

func (r sweepRef) String() string {
	return r.at.UTC().Format(time.RFC3339Nano) + "\x00" + r.ns + "\x00" + r.key
}

func parseSweepCursor(c string) (sweepRef, bool) {
	at, rest, ok := strings.Cut(c, "\x00")
	ns, key, ok2 := strings.Cut(rest, "\x00")
	t, err := time.Parse(time.RFC3339Nano, at)
	if !ok || !ok2 || err != nil {
		return sweepRef{}, false
	}
	return sweepRef{t, ns, key}, true
}

// sweepEvents deletes events older than retention.
func (s *Store) sweepEvents(ctx context.Context, retention time.Duration) (int, error) {
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM guard_events WHERE seq IN (
		SELECT seq FROM guard_events WHERE at <= $1 ORDER BY at LIMIT $2)`, now.Add(-retention), s.sweepBatch)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
