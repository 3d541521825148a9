package postgres

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Bulk decisions (keystore.Operations.ResolveMany) run over a selection by
// keystore.Filter (Select: the open states through guard_keys_open, a
// namespace and key prefix through the primary key) and batches of keys
// decided in one transaction each that locks their rows (DecideKeys),
// written with the statements of a single Resolve: row, activity, event.

// selectWhere is the SQL condition of f and its arguments. It may select
// more than f (case folding differs between Go and the database's
// collation); Filter.Match decides on each row.
func selectWhere(f keystore.Filter) (string, []any) {
	var args []any
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	where := []string{"true"}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		open := true
		for i, st := range f.States {
			states[i] = string(st)
			open = open && st != keystore.StateCompleted
		}
		where = append(where, "state = ANY("+arg(states)+"::text[])")
		if open {
			where = append(where, "state <> 'completed'") // lets the planner use the open-states index
		}
	}
	if f.Namespace != "" {
		where = append(where, "namespace = "+arg(f.Namespace))
	}
	if f.KeyPrefix != "" {
		where = append(where, "key LIKE "+arg(likePrefix(f.KeyPrefix)))
	}
	if f.Destination != "" {
		where = append(where, "destination = "+arg(f.Destination))
	}
	if f.Reason != "" {
		where = append(where, "reason = "+arg(string(f.Reason)))
	}
	// ILIKE folds only ASCII letters under the C collation (and others
	// differ from Go's folding), so a part with any other letter is left
	// to Filter.Match alone: SQL never selects less than Match does.
	if f.Holder != "" && isASCII(f.Holder) {
		where = append(where, "owner ILIKE "+arg(likePart(f.Holder)))
	}
	if f.Text != "" && isASCII(f.Text) {
		where = append(where, "key ILIKE "+arg(likePart(f.Text)))
	}
	if !f.From.IsZero() {
		where = append(where, "updated_at >= "+arg(f.From))
	}
	if !f.To.IsZero() {
		where = append(where, "updated_at < "+arg(f.To))
	}
	return strings.Join(where, " AND "), args
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// likePart is a LIKE pattern matching strings that contain p.
func likePart(p string) string { return "%" + likePrefix(p) }

// Select implements keystore.Selector. Records come in (namespace, key)
// order; the cursor is the last key read, as in List.
func (s *Store) Select(ctx context.Context, f keystore.Filter, cursor string, limit int) (keystore.Page, error) {
	f, err := f.Normalize()
	if err != nil {
		return keystore.Page{}, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	where, args := selectWhere(f)
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		afterNS, afterKey, ok := strings.Cut(string(raw), "\x00")
		if err != nil || !ok || f.Namespace != "" && afterNS != f.Namespace {
			return keystore.Page{}, errs.InvalidField("cursor", "cursor", "cursor is not one this server returned")
		}
		args = append(args, afterNS, afterKey)
		where += fmt.Sprintf(" AND (namespace, key) > ($%d, $%d)", len(args)-1, len(args))
	}
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, `SELECT namespace, key, `+pgKeyRead+` FROM guard_keys WHERE `+where+
		fmt.Sprintf(` ORDER BY namespace, key LIMIT $%d`, len(args)), args...)
	if err != nil {
		return keystore.Page{}, s.dbErr("select", err)
	}
	defer rows.Close()
	var page keystore.Page
	var lastNS, lastKey string
	for n := 0; rows.Next(); n++ {
		if n == limit {
			page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(lastNS + "\x00" + lastKey))
			break
		}
		var ns, key string
		r, _, err := scanRecord(prefixRow{rows, []any{&ns, &key}}, "", "")
		lastNS, lastKey = ns, key
		if errs.CodeOf(err) == errs.RecordDamaged {
			s.noteDamage(err) // left out of selections; its key answers record_damaged
			continue
		}
		if err != nil {
			return keystore.Page{}, s.dbErr("select", err)
		}
		if f.Match(r) {
			page.Items = append(page.Items, r)
		}
	}
	if err := rows.Err(); err != nil {
		return keystore.Page{}, s.dbErr("select", err)
	}
	return page, nil
}

// DecideKeys implements keystore.Driver: one transaction that locks the
// batch's rows in key order (single writes lock one key, then the event
// counter: the same order, so no deadlock between them), run again when it
// loses a race. A dry run reads the rows without locking and writes
// nothing.
func (s *Store) DecideKeys(ctx context.Context, op keystore.KeysOp) error {
	if len(op.Keys) == 0 {
		return nil
	}
	nss, keys := make([]string, len(op.Keys)), make([]string, len(op.Keys))
	for i, ref := range op.Keys {
		nss[i], keys[i] = ref.Namespace, ref.Key
	}
	for try := 1; ; try++ {
		err := s.decideBatch(ctx, op, nss, keys)
		switch {
		case err != nil && retryablePg(err) && try < maxDecisionTries:
			continue
		case err != nil:
			return s.dbErr(op.Name, err)
		}
		return nil
	}
}

// ClaimBulk implements keystore.Driver with guard_bulk. A kept id never
// changes, so an insert that finds the id taken by a guard that claimed it
// meanwhile decides again on what that guard wrote.
func (s *Store) ClaimBulk(ctx context.Context, id string, decide func(prev *keystore.BulkAction, now time.Time) (*keystore.BulkAction, error)) error {
	for range 2 {
		var prev *keystore.BulkAction
		var a bulkRow
		err := s.pool.QueryRow(ctx, `SELECT `+bulkColumns+` FROM guard_bulk WHERE id = $1`, id).Scan(a.fields()...)
		switch {
		case err == nil:
			prev = a.action()
		case !errors.Is(err, pgx.ErrNoRows):
			return s.dbErr("resolve-bulk", err)
		}
		now, err := s.now(ctx, s.pool)
		if err != nil {
			return s.dbErr("resolve-bulk", err)
		}
		next, err := decide(prev, now)
		if err != nil || next == nil {
			return err
		}
		tag, err := s.pool.Exec(ctx, `INSERT INTO guard_bulk (id, content, created_at, by_person, note, resolution, final, rerun)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING`,
			next.ID, next.Content, next.At, next.By, next.Note, string(next.Resolution), next.Final, next.Rerun)
		if err != nil {
			return s.dbErr("resolve-bulk", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
	}
	return errs.Errorf(errs.Conflict, "bulk id %s was claimed by another request at the same time; nothing changed", id)
}

const bulkColumns = `id, content, created_at, by_person, note, resolution, final, rerun`

// bulkRow is a guard_bulk row as bulkColumns reads it.
type bulkRow struct {
	keystore.BulkAction
	resolution string
}

func (r *bulkRow) fields() []any {
	return []any{&r.ID, &r.Content, &r.At, &r.By, &r.Note, &r.resolution, &r.Final, &r.Rerun}
}

func (r *bulkRow) action() *keystore.BulkAction {
	a := r.BulkAction
	a.At, a.Resolution = a.At.UTC(), keystore.State(r.resolution)
	return &a
}

// BulkActions implements keystore.BulkResolver.
func (s *Store) BulkActions(ctx context.Context, ids []string) (map[string]keystore.BulkAction, error) {
	out := map[string]keystore.BulkAction{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+bulkColumns+` FROM guard_bulk WHERE id = ANY($1::text[])`, ids)
	if err != nil {
		return nil, s.dbErr("bulk actions", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r bulkRow
		if err := rows.Scan(r.fields()...); err != nil {
			return nil, s.dbErr("bulk actions", err)
		}
		out[r.ID] = *r.action()
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("bulk actions", err)
	}
	return out, nil
}

const pgSelectBatch = `SELECT namespace, key, ` + pgKeyRead + ` FROM guard_keys
	WHERE (namespace, key) IN (SELECT * FROM unnest($1::text[], $2::text[])) ORDER BY namespace, key`

// decideBatch carries out one try of op in one transaction.
func (s *Store) decideBatch(ctx context.Context, op keystore.KeysOp, nss, keys []string) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	open := !op.DryRun // readBatch begins the transaction unless it is a dry run
	defer func() {
		if open {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()
	found, now, err := s.readBatch(ctx, conn.Conn(), op.DryRun, nss, keys)
	if err != nil {
		return err
	}
	w, committed, err := s.queueBatch(op, nss, keys, found, now)
	if err != nil || op.DryRun || w.Len() == 0 {
		return err // the deferred rollback ends the transaction
	}
	if err := s.commitOn(ctx, keystore.Op{Name: op.Name, Namespace: nss[0], Key: keys[0]}, conn.Conn(), w, committed); err != nil {
		return err
	}
	open = false
	return nil
}

// batchRow is a key of the batch as read, keyed by namespace+"\x00"+key;
// a damaged one is counted and left alone.
type batchRow struct {
	cur     *keystore.Record
	version int64
	damaged bool
}

// readBatch reads the batch's keys in one round trip, locking them in a
// transaction it begins unless dryRun, and the time of the decision.
func (s *Store) readBatch(ctx context.Context, conn *pgx.Conn, dryRun bool, nss, keys []string) (found map[string]batchRow, now time.Time, err error) {
	b := &pgx.Batch{}
	if !dryRun {
		b.Queue("BEGIN")
		b.Queue(pgSelectBatch+" FOR UPDATE", nss, keys)
	} else {
		b.Queue(pgSelectBatch, nss, keys)
	}
	if s.clock == nil {
		b.Queue(pgClock) // after the locks: the time of the decision, not of the wait
	}
	found = map[string]batchRow{}
	br := conn.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if !dryRun {
		if _, err = br.Exec(); err != nil {
			return found, now, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return found, now, err
	}
	for rows.Next() {
		var ns, key string
		r, version, err := scanRecord(prefixRow{rows, []any{&ns, &key}}, "", "")
		if errs.CodeOf(err) == errs.RecordDamaged {
			s.noteDamage(err)
			found[ns+"\x00"+key] = batchRow{damaged: true}
			continue
		}
		if err != nil {
			rows.Close()
			return found, now, err
		}
		found[ns+"\x00"+key] = batchRow{cur: r, version: version}
	}
	if err := rows.Err(); err != nil {
		return found, now, err
	}
	now, err = s.scanNow(br)
	return found, now, err
}

// queueBatch decides the batch at now and queues the writes of the keys
// it changes (none on a dry run), the events after every row.
func (s *Store) queueBatch(op keystore.KeysOp, nss, keys []string, found map[string]batchRow, now time.Time) (w *pgx.Batch, committed []keystore.CommittedKey, err error) {
	w = &pgx.Batch{}
	got := make([]keystore.Loaded, len(keys))
	for i := range keys {
		row := found[nss[i]+"\x00"+keys[i]]
		got[i] = keystore.Loaded{KeyRef: keystore.KeyRef{Namespace: nss[i], Key: keys[i]}, Record: row.cur, Damaged: row.damaged}
	}
	steps, err := op.Decide(got, now)
	if err != nil || op.DryRun {
		return w, nil, err
	}
	var events []keystore.Event
	for i, st := range steps {
		if st.Breaker != nil {
			return w, nil, fmt.Errorf("%s %s/%s: a batch decision changes no breaker", op.Name, nss[i], keys[i])
		}
		if st.Record != nil {
			if err := queueRecord(w, got[i].Record, found[nss[i]+"\x00"+keys[i]].version, st.Record); err != nil {
				return w, nil, err
			}
			committed = append(committed, st.Committed()...)
		}
		events = append(events, st.Events...)
	}
	// The events last: the event counter row is then locked after every
	// key and count row of the batch, the order single writes lock them in,
	// so a single write never waits on the batch's counter while the batch
	// waits on its row.
	for _, ev := range events {
		queueEvent(w, ev)
	}
	return w, committed, nil
}
