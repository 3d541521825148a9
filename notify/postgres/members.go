package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/n8n-guard/n8n-guard/notify"
)

// addMember records m as a key of the group whose head is head (after the
// head's row is written); a key's attempt joins one group.
func addMember(ctx context.Context, tx pgx.Tx, head string, m *notify.Member) error {
	if m == nil {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO guard_notify_members (head, namespace, key, attempt) VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`, head, m.Namespace, m.Key, m.Attempt)
	return err
}

// Settle implements notify.Outbox: the member's row is marked under the
// head's row lock, so two replicas reading one event settle it once.
func (o *Outbox) Settle(ctx context.Context, m notify.Member, fn func(head *notify.Record)) (*notify.Record, error) {
	var out *notify.Record
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		out = nil
		var head string
		err := tx.QueryRow(ctx, `SELECT head FROM guard_notify_members WHERE namespace = $1 AND key = $2 AND attempt = $3`,
			m.Namespace, m.Key, m.Attempt).Scan(&head)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		cur, err := getOutboxRecord(ctx, tx, head) // locks the head first: settles of one group take turns
		if err != nil || cur == nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE guard_notify_members SET settled = true
			WHERE namespace = $1 AND key = $2 AND attempt = $3 AND NOT settled`, m.Namespace, m.Key, m.Attempt)
		if err != nil || tag.RowsAffected() == 0 {
			return err // settled already
		}
		fn(cur)
		out = cur
		return putOutboxRecord(ctx, tx, cur, false)
	})
	return out, notify.Unavailable("settle", err)
}

// Members implements notify.Outbox.
func (o *Outbox) Members(ctx context.Context, head string, after *notify.Member, limit int) ([]notify.Member, error) {
	var from notify.Member
	if after != nil {
		from = *after
	} else {
		from.Attempt = -1
	}
	rows, err := o.pool.Query(ctx, `SELECT namespace, key, attempt, settled FROM guard_notify_members
		WHERE head = $1 AND (namespace, key, attempt) > ($2, $3, $4)
		ORDER BY namespace, key, attempt LIMIT $5`, head, from.Namespace, from.Key, from.Attempt, limit)
	if err != nil {
		return nil, notify.Unavailable("members", err)
	}
	defer rows.Close()
	var out []notify.Member
	for rows.Next() {
		var m notify.Member
		if err := rows.Scan(&m.Namespace, &m.Key, &m.Attempt, &m.Settled); err != nil {
			return nil, notify.Unavailable("members", err)
		}
		out = append(out, m)
	}
	return out, notify.Unavailable("members", rows.Err())
}
