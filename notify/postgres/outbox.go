// Package postgres keeps notify's outbox in PostgreSQL, shared by every
// n8n-guard replica on the database. It only loads, locks and saves;
// notify decides.
package postgres

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/n8n-guard/n8n-guard/internal/migrate"
	"github.com/n8n-guard/n8n-guard/notify"
)

// Options configure New.
type Options struct {
	// Replica names this process in claims (default host:pid). A replica
	// takes back its own claims at once (after a Slack outage, say); other
	// replicas wait for ClaimTTL.
	Replica string
	// ClaimTTL is how long a notification handed to one replica's worker
	// is left to it before another replica may take it over, should the
	// first have died mid-call (default 5m). It must exceed one worker
	// pass (at most 50 Slack calls, each bounded by RequestTimeout and
	// cut short by the breaker).
	ClaimTTL time.Duration
}

// withDefaults fills in the defaults of Options, as their comments say:
// the one place they are applied. A zero or negative ClaimTTL is the
// default.
func (o Options) withDefaults() Options {
	if o.Replica == "" {
		host, _ := os.Hostname()
		o.Replica = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	o.ClaimTTL = cmp.Or(max(o.ClaimTTL, 0), 5*time.Minute)
	return o
}

// Outbox keeps the outbox in PostgreSQL, shared by every n8n-guard
// replica on the database. Due claims the notifications it returns (FOR
// UPDATE SKIP LOCKED, then claimed_by/claimed_until), so two replicas'
// workers never make the same Slack call; Update, which records the
// call's result, releases the claim. Event consumption is serialized on
// the event-cursor row, and once-keys are a primary key, so an event
// becomes one notification however many replicas read it.
type Outbox struct {
	pool    *pgxpool.Pool
	replica string
	ttl     time.Duration
}

var _ notify.Outbox = (*Outbox)(nil)

// New applies the outbox's schema migrations on pool's database and
// returns the outbox (for notify.Options.Outbox). The pool is the
// caller's; typically the keystore's (postgres.Store.Pool).
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Outbox, error) {
	opts = opts.withDefaults()
	if err := migrateOutbox(ctx, pool); err != nil {
		return nil, fmt.Errorf("notify outbox on postgres: %w", err)
	}
	return &Outbox{pool: pool, replica: opts.Replica, ttl: opts.ClaimTTL}, nil
}

// The outbox's schema: numbered SQL files, applied by internal/migrate.
//
//go:embed migrations/*.sql
var outboxMigrations embed.FS

func migrateOutbox(ctx context.Context, pool *pgxpool.Pool) error {
	files, err := fs.Sub(outboxMigrations, "migrations")
	if err != nil {
		return err
	}
	return migrate.Run(ctx, pool, migrate.Schema{
		Name:  "notify outbox",
		Files: files,
		Table: "guard_notify_schema_migrations",
		Lock:  0x6e386e6e, // "n8nn"; replicas migrating at once take turns
	}, nil)
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// put saves r (insert or replace) and, with release, drops its claim.
func putOutboxRecord(ctx context.Context, tx pgx.Tx, r *notify.Record, release bool) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var ns, key *string
	if n, k, ok := r.Subject(); ok {
		ns, key = &n, &k
	}
	_, err = tx.Exec(ctx, `INSERT INTO guard_notifications (id, status, due_at, delivered_at, doc, escalate_at, key_namespace, key_name)
		VALUES ($1, $2, $3, $4, $5, $7, $8, $9)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status, due_at = excluded.due_at,
			delivered_at = excluded.delivered_at, doc = excluded.doc, escalate_at = excluded.escalate_at,
			claimed_by = CASE WHEN $6 THEN NULL ELSE guard_notifications.claimed_by END,
			claimed_until = CASE WHEN $6 THEN NULL ELSE guard_notifications.claimed_until END`,
		r.ID, string(r.Status), nullTime(r.DueAt), r.DeliveredAt, doc, release, r.EscalateAt, ns, key)
	return err
}

func getOutboxRecord(ctx context.Context, tx pgx.Tx, id string) (*notify.Record, error) {
	var doc []byte
	err := tx.QueryRow(ctx, `SELECT doc FROM guard_notifications WHERE id = $1 FOR UPDATE`, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := new(notify.Record)
	if err := json.Unmarshal(doc, r); err != nil {
		return nil, fmt.Errorf("decode notification %s: %w", id, err)
	}
	return r, nil
}

func (o *Outbox) Add(ctx context.Context, adds []notify.Addition, cursor *uint64) ([]notify.Added, error) {
	var out []notify.Added
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		out = make([]notify.Added, 0, len(adds))
		if cursor != nil {
			// Replicas consuming the event log take turns here; the one
			// that comes second finds the once-keys taken and adds nothing.
			if _, err := tx.Exec(ctx, `SELECT value FROM guard_notify_meta WHERE name = 'event_cursor' FOR UPDATE`); err != nil {
				return err
			}
		}
		for _, a := range adds {
			res, err := o.addOne(ctx, tx, a)
			if err != nil {
				return err
			}
			out = append(out, res)
		}
		if cursor != nil {
			// Never backwards: a slower replica must not undo a faster one.
			_, err := tx.Exec(ctx, `UPDATE guard_notify_meta SET value = greatest(value, $1) WHERE name = 'event_cursor'`, int64(*cursor))
			return err
		}
		return nil
	})
	return out, notify.Unavailable("add", err)
}

func (o *Outbox) addOne(ctx context.Context, tx pgx.Tx, a notify.Addition) (notify.Added, error) {
	rec := a.Record
	if a.Once != "" {
		tag, err := tx.Exec(ctx, `INSERT INTO guard_notify_once (once, added_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			[]byte(a.Once), rec.CreatedAt)
		if err != nil {
			return notify.Added{}, err
		}
		if tag.RowsAffected() == 0 {
			return notify.Added{Skipped: true}, nil
		}
	}
	if a.Window > 0 {
		end := rec.CreatedAt.Add(a.Window)
		// Either this notification opens the group, or the group's row
		// (inserted by another transaction, which this one waits for) is
		// locked and examined.
		tag, err := tx.Exec(ctx, `INSERT INTO guard_notify_groups (grp, head, ends_at) VALUES ($1, $2, $3)
			ON CONFLICT (grp) DO NOTHING`, rec.Group, rec.ID, end)
		if err != nil {
			return notify.Added{}, err
		}
		if tag.RowsAffected() == 0 {
			var head string
			var ends time.Time
			if err := tx.QueryRow(ctx, `SELECT head, ends_at FROM guard_notify_groups WHERE grp = $1 FOR UPDATE`, rec.Group).Scan(&head, &ends); err != nil {
				return notify.Added{}, err
			}
			if rec.CreatedAt.Before(ends) {
				h, err := getOutboxRecord(ctx, tx, head)
				if err != nil {
					return notify.Added{}, err
				}
				// A dead head is never sent again: joining it would swallow
				// the failure, so a new group starts instead.
				if h != nil && h.Status != notify.StatusDead {
					notify.Join(h, rec.CreatedAt, a.Window)
					if err := putOutboxRecord(ctx, tx, h, false); err != nil {
						return notify.Added{}, err
					}
					if err := addMember(ctx, tx, h.ID, a.Member); err != nil {
						return notify.Added{}, err
					}
					return notify.Added{Record: h, Joined: true}, nil
				}
			}
			if _, err := tx.Exec(ctx, `UPDATE guard_notify_groups SET head = $2, ends_at = $3 WHERE grp = $1`, rec.Group, rec.ID, end); err != nil {
				return notify.Added{}, err
			}
		}
		rec.GroupEnd = end
	}
	if err := putOutboxRecord(ctx, tx, rec, false); err != nil {
		return notify.Added{}, err
	}
	if err := addMember(ctx, tx, rec.ID, a.Member); err != nil {
		return notify.Added{}, err
	}
	return notify.Added{Record: rec}, nil
}

func (o *Outbox) EventCursor(ctx context.Context) (uint64, error) {
	var c int64
	err := o.pool.QueryRow(ctx, `SELECT value FROM guard_notify_meta WHERE name = 'event_cursor'`).Scan(&c)
	return uint64(c), notify.Unavailable("event cursor", err)
}

// Due claims up to limit due notifications for this replica and returns
// them, earliest first. Rows another replica holds (locked now, or
// claimed and not yet past their claim) are skipped, not waited for.
func (o *Outbox) Due(ctx context.Context, now time.Time, limit int) ([]*notify.Record, error) {
	rows, err := o.pool.Query(ctx, `WITH c AS (
			SELECT id FROM guard_notifications
			WHERE due_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1 OR claimed_by = $2)
			ORDER BY due_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
		UPDATE guard_notifications n SET claimed_by = $2, claimed_until = $4
		FROM c WHERE n.id = c.id RETURNING n.doc`, now, o.replica, limit, now.Add(o.ttl))
	if err != nil {
		return nil, notify.Unavailable("due", err)
	}
	defer rows.Close()
	var out []*notify.Record
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, notify.Unavailable("due", err)
		}
		r := new(notify.Record)
		if err := json.Unmarshal(doc, r); err != nil {
			return nil, notify.Unavailable("due", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, notify.Unavailable("due", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].DueAt.Equal(out[j].DueAt) {
			return out[i].DueAt.Before(out[j].DueAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Update applies fn to the stored notification under its row lock and
// releases this replica's claim on it.
func (o *Outbox) Update(ctx context.Context, id string, fn func(r *notify.Record)) (*notify.Record, error) {
	var r *notify.Record
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		cur, err := getOutboxRecord(ctx, tx, id)
		if err != nil || cur == nil {
			r = nil
			return err
		}
		fn(cur)
		r = cur
		return putOutboxRecord(ctx, tx, cur, true)
	})
	return r, notify.Unavailable("update", err)
}

func (o *Outbox) Get(ctx context.Context, id string) (*notify.Record, error) {
	var doc []byte
	err := o.pool.QueryRow(ctx, `SELECT doc FROM guard_notifications WHERE id = $1`, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, notify.Unavailable("get", err)
	}
	r := new(notify.Record)
	if err := json.Unmarshal(doc, r); err != nil {
		return nil, notify.Unavailable("get", err)
	}
	return r, nil
}

func (o *Outbox) Escalating(ctx context.Context, now time.Time, limit int) ([]*notify.Record, error) {
	rows, err := o.pool.Query(ctx, `SELECT doc FROM guard_notifications WHERE escalate_at <= $1
		ORDER BY escalate_at, id LIMIT $2`, now, limit)
	if err != nil {
		return nil, notify.Unavailable("escalating", err)
	}
	defer rows.Close()
	var out []*notify.Record
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, notify.Unavailable("escalating", err)
		}
		r := new(notify.Record)
		if err := json.Unmarshal(doc, r); err != nil {
			return nil, notify.Unavailable("escalating", err)
		}
		out = append(out, r)
	}
	return out, notify.Unavailable("escalating", rows.Err())
}

// Escalate locks the due rows (FOR UPDATE SKIP LOCKED: a row another
// guard is escalating is left to it) and saves each with its escalation
// in the same transaction; the next guard finds escalate_at moved on.
func (o *Outbox) Escalate(ctx context.Context, now time.Time, limit int, fn func(r *notify.Record) *notify.Record) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `SELECT doc FROM guard_notifications WHERE escalate_at <= $1
			ORDER BY escalate_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`, now, limit)
		if err != nil {
			return err
		}
		var due []*notify.Record
		for rows.Next() {
			var doc []byte
			if err := rows.Scan(&doc); err != nil {
				rows.Close()
				return err
			}
			r := new(notify.Record)
			if err := json.Unmarshal(doc, r); err != nil {
				rows.Close()
				return err
			}
			due = append(due, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range due {
			esc := fn(r)
			if err := putOutboxRecord(ctx, tx, r, false); err != nil {
				return err
			}
			if esc != nil {
				if err := putOutboxRecord(ctx, tx, esc, false); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return n, notify.Unavailable("escalate", err)
}

func (o *Outbox) List(ctx context.Context, q notify.ListQuery) (notify.Page, error) {
	page := notify.Page{Items: []notify.Notification{}}
	rows, err := o.pool.Query(ctx, `SELECT doc FROM guard_notifications
		WHERE ($1 = '' OR status = $1) AND ($2 = '' OR id < $2)
		ORDER BY id DESC LIMIT $3`, string(q.Status), q.Cursor, q.Limit+1)
	if err != nil {
		return page, notify.Unavailable("list", err)
	}
	defer rows.Close()
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return page, notify.Unavailable("list", err)
		}
		if len(page.Items) == q.Limit {
			page.NextCursor = page.Items[len(page.Items)-1].ID
			break
		}
		var r notify.Record
		if err := json.Unmarshal(doc, &r); err != nil {
			return page, notify.Unavailable("list", err)
		}
		page.Items = append(page.Items, r.Item())
	}
	return page, notify.Unavailable("list", rows.Err())
}

func (o *Outbox) Waiting(ctx context.Context) (int, error) {
	var n int64
	err := o.pool.QueryRow(ctx, `SELECT count(*) FROM guard_notifications WHERE due_at IS NOT NULL`).Scan(&n)
	return int(n), notify.Unavailable("waiting", err)
}

func (o *Outbox) Purge(ctx context.Context, cutoff, now time.Time, limit int) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		// IDs sort by creation time: nothing created after cutoff is old enough.
		tag, err := tx.Exec(ctx, `DELETE FROM guard_notifications WHERE id IN (
			SELECT id FROM guard_notifications
			WHERE id < $1 AND status <> 'pending' AND due_at IS NULL AND escalate_at IS NULL
				AND (delivered_at IS NULL OR delivered_at <= $2)
			ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)`, notify.IDPrefix(cutoff), cutoff, limit)
		if err != nil {
			return err
		}
		n = int(tag.RowsAffected())
		if _, err := tx.Exec(ctx, `DELETE FROM guard_notify_groups WHERE ends_at <= $1`, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM guard_notify_once WHERE added_at < $1`, cutoff); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM guard_notify_marks WHERE expires_at <= $1`, now)
		return err
	})
	return n, notify.Unavailable("purge", err)
}

func (o *Outbox) SlackUser(ctx context.Context, email string) (string, bool, error) {
	var id string
	err := o.pool.QueryRow(ctx, `SELECT user_id FROM guard_notify_slack_users WHERE email = $1`, strings.ToLower(email)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return id, id != "", notify.Unavailable("slack user", err)
}

func (o *Outbox) SetSlackUser(ctx context.Context, email, userID string) error {
	_, err := o.pool.Exec(ctx, `INSERT INTO guard_notify_slack_users (email, user_id) VALUES ($1, $2)
		ON CONFLICT (email) DO UPDATE SET user_id = excluded.user_id`, strings.ToLower(email), userID)
	return notify.Unavailable("set slack user", err)
}

// AboutDestination implements notify.Outbox: the outages share the keys'
// columns under namespace "".
func (o *Outbox) AboutDestination(ctx context.Context, dest string, limit int) ([]*notify.Record, error) {
	return o.AboutKey(ctx, "", dest, limit)
}

// AboutKey implements notify.Outbox, newest first.
func (o *Outbox) AboutKey(ctx context.Context, namespace, key string, limit int) ([]*notify.Record, error) {
	rows, err := o.pool.Query(ctx, `SELECT doc FROM guard_notifications WHERE key_namespace = $1 AND key_name = $2
		ORDER BY id DESC LIMIT $3`, namespace, key, limit)
	if err != nil {
		return nil, notify.Unavailable("about key", err)
	}
	defer rows.Close()
	var out []*notify.Record
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, notify.Unavailable("about key", err)
		}
		r := new(notify.Record)
		if err := json.Unmarshal(doc, r); err != nil {
			return nil, notify.Unavailable("about key", err)
		}
		out = append(out, r)
	}
	return out, notify.Unavailable("about key", rows.Err())
}

// FirstUse implements notify.Outbox: one row per mark, shared by every
// replica; an expired mark is taken over (and Purge deletes it).
func (o *Outbox) FirstUse(ctx context.Context, mark string, now, expires time.Time) (bool, error) {
	tag, err := o.pool.Exec(ctx, `INSERT INTO guard_notify_marks (mark, expires_at) VALUES ($1, $2)
		ON CONFLICT (mark) DO UPDATE SET expires_at = excluded.expires_at WHERE guard_notify_marks.expires_at <= $3`,
		mark, expires, now)
	if err != nil {
		return false, notify.Unavailable("first use", err)
	}
	return tag.RowsAffected() == 1, nil
}
