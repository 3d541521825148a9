package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
	where, args := ``, []any{before, kinds, 0}
	if q.Bulk != "" {
		// spelled with the partial index's condition, so the plan uses it
		where, args = ` AND bulk = $4 AND bulk <> ''`, append(args, q.Bulk)
	}
	return s.readEvents("recent events", before, keystore.EventLimit(q.Limit), func(before int64, n int) (pgx.Rows, error) {
		args[0], args[2] = before, n
		return s.pool.Query(ctx, `SELECT `+eventColumns+` FROM guard_events
		WHERE seq < $1 AND (cardinality($2::text[]) = 0 OR kind = ANY($2::text[]))`+where+` ORDER BY seq DESC LIMIT $3`, args...)
	})
}

// readEvents reads up to limit events, query giving the next n rows
// after (in its order) the seq from: a page of skipped rows (damaged:
// scanEvents) is followed by the next, so the page is full unless the
// log ends.
func (s *Store) readEvents(what string, from int64, limit int, query func(from int64, n int) (pgx.Rows, error)) ([]keystore.Event, error) {
	var out []keystore.Event
	for {
		asked := limit - len(out)
		rows, err := query(from, asked)
		if err != nil {
			return nil, s.dbErr(what, err)
		}
		evs, read, last, err := s.scanEvents(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
		if read < asked || len(out) >= limit {
			return out, nil
		}
		from = last
	}
}

// scanEvents reads the rows of an event query; read counts them, skipped
// ones included, and last is the seq of the last.
func (s *Store) scanEvents(rows pgx.Rows) (out []keystore.Event, read int, last int64, err error) {
	defer rows.Close()
	for rows.Next() {
		var ev keystore.Event
		var seq int64
		var kind, reason string
		var attempt, paused, resumed, lost int32
		var tookMs int64
		var at, reopens pgtype.Timestamptz
		if err := rows.Scan(&seq, &at, &kind, &ev.Namespace, &ev.Key, &attempt, &ev.Owner, &ev.Destination,
			&reason, &ev.Message, &reopens, &paused, &ev.Bulk, &ev.Summary, &resumed, &lost, &tookMs); err != nil {
			return nil, 0, 0, s.dbErr("events", err)
		}
		read, last = read+1, seq
		if !finite(at) || reopens.Valid && !finite(reopens) {
			s.noteDamagedEvent(seq)
			continue
		}
		ev.Seq, ev.Kind, ev.Reason, ev.Attempt, ev.PausedReserves = uint64(seq), keystore.EventKind(kind), keystore.Reason(reason), int(attempt), int(paused)
		ev.Resumed, ev.Lost, ev.Took = int(resumed), int(lost), time.Duration(tookMs)*time.Millisecond
		ev.At = at.Time.UTC()
		if reopens.Valid {
			ev.ReopensAt = utcPtr(&reopens.Time)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, 0, s.dbErr("events", err)
	}
	return out, read, last, nil
}

// The columns of guard_events are typed and NOT NULL, so PostgreSQL
// refuses a row that would not read back, but for a time set by hand to
// ±infinity, which no time.Time holds. Such a row is skipped by every read
// of the event log (notify's intake, the audit), so it never holds back
// the events after it, and said once per process (a log line and
// Options.Damaged, as of a damaged row). The sweep deletes by the column
// in SQL and never reads it: it removes a -infinity row at once and never
// a +infinity one, and goes on past both.

func finite(t pgtype.Timestamptz) bool { return t.Valid && t.InfinityModifier == pgtype.Finite }

func (s *Store) noteDamagedEvent(seq int64) {
	msg := fmt.Sprintf("event %d of guard_events has a time of ±infinity", seq)
	if s.firstDamage(msg) {
		s.log.Error("postgres store: an event of the event log cannot be read; notify and the audit skip it", "err", msg)
	}
}
