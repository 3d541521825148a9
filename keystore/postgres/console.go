package postgres

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// activityShards spreads each hour's counters over this many rows.
const activityShards = 16

const pgAddActivity = `INSERT INTO guard_activity (hour, kind, shard, n) VALUES ($1, $2, $3, $4)
	ON CONFLICT (hour, kind, shard) DO UPDATE SET n = guard_activity.n + EXCLUDED.n`

func activityShard(ns, key string) int {
	h := fnv.New32a()
	h.Write([]byte(ns))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int(h.Sum32() % activityShards)
}

const pgAddCounts = `INSERT INTO guard_counts (namespace, state, shard, n) VALUES ($1, $2, $3, $4), ($1, $5, $3, $6)
	ON CONFLICT (namespace, state, shard) DO UPDATE SET n = guard_counts.n + EXCLUDED.n`

// queueActivity counts a write of next over prev (nil: a new key) on the
// chart and in the per-state counts, in the same transaction.
func queueActivity(b *pgx.Batch, prev, next *keystore.Record) {
	shard := activityShard(next.Namespace, next.Key)
	if kind := keystore.ActivityOf(prev, next); kind != keystore.ActivityNone {
		b.Queue(pgAddActivity, next.UpdatedAt.UTC().Truncate(time.Hour), int(kind), shard, 1)
	}
	switch {
	case prev == nil:
		b.Queue(`INSERT INTO guard_counts (namespace, state, shard, n) VALUES ($1, $2, $3, 1)
			ON CONFLICT (namespace, state, shard) DO UPDATE SET n = guard_counts.n + 1`, next.Namespace, string(next.State), shard)
	case prev.State != next.State:
		// Rows in the order of the state's name: see guard_counts.
		a, da, z, dz := string(prev.State), -1, string(next.State), 1
		if z < a {
			a, da, z, dz = z, dz, a, da
		}
		b.Queue(pgAddCounts, next.Namespace, a, shard, da, z, dz)
	}
}

// foldActivity writes the duplicates counted in memory and drops hours
// older than keystore.ActivityHours.
func (s *Store) foldActivity(ctx context.Context) error {
	dups := s.dups.Take()
	now, err := s.now(ctx, s.pool)
	if err != nil {
		s.giveBack(dups)
		return err
	}
	b := &pgx.Batch{}
	for h, n := range dups {
		b.Queue(pgAddActivity, time.Unix(h, 0).UTC(), int(keystore.ActivityDuplicate), 0, n)
	}
	b.Queue(`DELETE FROM guard_activity WHERE hour < $1`, now.Truncate(time.Hour).Add(-keystore.ActivityHours*time.Hour))
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		s.giveBack(dups)
		return err
	}
	return nil
}

func (s *Store) giveBack(dups map[int64]int) {
	for h, n := range dups {
		s.dups.Add(time.Unix(h, 0), n)
	}
}

// Activity implements Store.
func (s *Store) Activity(ctx context.Context, since time.Time) ([]keystore.HourActivity, error) {
	since = since.UTC().Truncate(time.Hour)
	rows, err := s.pool.Query(ctx, `SELECT hour, kind, sum(n) FROM guard_activity WHERE hour >= $1
		GROUP BY hour, kind ORDER BY hour`, since)
	if err != nil {
		return nil, s.dbErr("activity", err)
	}
	defer rows.Close()
	var out []keystore.HourActivity
	for rows.Next() {
		var hour time.Time
		var kind int16
		var n int64
		if err := rows.Scan(&hour, &kind, &n); err != nil {
			return nil, s.dbErr("activity", err)
		}
		hour = hour.UTC()
		if len(out) == 0 || !out[len(out)-1].Hour.Equal(hour) {
			out = append(out, keystore.HourActivity{Hour: hour})
		}
		out[len(out)-1].Add(keystore.ActivityKind(kind), int(n))
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("activity", err)
	}
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return nil, s.dbErr("activity", err)
	}
	return s.dups.AddTo(out, since, now), nil
}

// ResetBreaker implements Store: the breaker row is locked for the
// decision, as every breaker change is.
func (s *Store) ResetBreaker(ctx context.Context, dest, by, reason string) (keystore.Breaker, error) {
	if err := keystore.CheckNamespace("destination", dest); err != nil {
		return keystore.Breaker{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return keystore.Breaker{}, s.dbErr("reset breaker", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	br, exists, err := scanBreaker(tx.QueryRow(ctx, pgSelectBreaker+` FOR UPDATE`, dest), dest)
	if err != nil {
		return keystore.Breaker{}, s.dbErr("reset breaker", err)
	}
	now, err := s.now(ctx, tx)
	if err != nil {
		return keystore.Breaker{}, s.dbErr("reset breaker", err)
	}
	st, err := keystore.DecideResetBreaker(br, exists, by, reason, now)
	if err != nil {
		return keystore.Breaker{}, err
	}
	b := &pgx.Batch{}
	if len(st.Events) > 0 {
		queueBreaker(b, st.Breaker, exists)
		for _, ev := range st.Events {
			queueEvent(b, ev)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return keystore.Breaker{}, s.dbErr("reset breaker", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return keystore.Breaker{}, s.dbErr("reset breaker", err)
	}
	if len(st.Events) > 0 {
		s.commits.Notify()
	}
	return st.Breaker.View(now), nil
}
