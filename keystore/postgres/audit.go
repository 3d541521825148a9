package postgres

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/n8n-guard/n8n-guard/keystore"
)

const eventColumns = `seq, at, kind, namespace, key, attempt, owner, destination, reason, message, reopens_at, paused_reserves, bulk, summary, resumed, lost, took_ms`

// RecentEvents implements Store: the primary key walked backwards from
// Before, filtered by kind and bulk (a bulk's events by their index).
func (s *Store) RecentEvents(ctx context.Context, q keystore.EventQuery) ([]keystore.Event, error) {
	before := int64(math.MaxInt64)
	if q.Before != 0 && q.Before <= math.MaxInt64 {
		before = int64(q.Before)
	}
	kinds := make([]string, len(q.Kinds))
	for i, k := range q.Kinds {
		kinds[i] = string(k)
	}
	where, args := ``, []any{before, kinds, keystore.EventLimit(q.Limit)}
	if q.Bulk != "" {
		// spelled with the partial index's condition, so the plan uses it
		where, args = ` AND bulk = $4 AND bulk <> ''`, append(args, q.Bulk)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM guard_events
		WHERE seq < $1 AND (cardinality($2::text[]) = 0 OR kind = ANY($2::text[]))`+where+` ORDER BY seq DESC LIMIT $3`, args...)
	if err != nil {
		return nil, s.dbErr("recent events", err)
	}
	return s.scanEvents(rows)
}

func (s *Store) scanEvents(rows pgx.Rows) ([]keystore.Event, error) {
	defer rows.Close()
	var out []keystore.Event
	for rows.Next() {
		var ev keystore.Event
		var seq int64
		var kind, reason string
		var attempt, paused, resumed, lost int32
		var tookMs int64
		if err := rows.Scan(&seq, &ev.At, &kind, &ev.Namespace, &ev.Key, &attempt, &ev.Owner, &ev.Destination,
			&reason, &ev.Message, &ev.ReopensAt, &paused, &ev.Bulk, &ev.Summary, &resumed, &lost, &tookMs); err != nil {
			return nil, s.dbErr("events", err)
		}
		ev.Seq, ev.Kind, ev.Reason, ev.Attempt, ev.PausedReserves = uint64(seq), keystore.EventKind(kind), keystore.Reason(reason), int(attempt), int(paused)
		ev.Resumed, ev.Lost, ev.Took = int(resumed), int(lost), time.Duration(tookMs)*time.Millisecond
		ev.At, ev.ReopensAt = ev.At.UTC(), utcPtr(ev.ReopensAt)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("events", err)
	}
	return out, nil
}
