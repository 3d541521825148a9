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

// Bulk decisions: a selection by keystore.Filter in one query (the open
// states through guard_keys_open, a namespace and key prefix through the
// primary key), and the decision of every selected key in transactions of
// keystore.BulkBatch keys that lock their rows, each key decided by
// keystore.DecideBulkResolve (DecideResolve underneath) and written with
// the statements of a single Resolve: row, activity, event.

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

// selectRefs reads the namespace and key of every record f selects.
func (s *Store) selectRefs(ctx context.Context, f keystore.Filter) (nss, keys []string, err error) {
	where, args := selectWhere(f)
	rows, err := s.pool.Query(ctx, `SELECT namespace, key, `+pgKeyRead+` FROM guard_keys WHERE `+where+` ORDER BY namespace, key`, args...)
	if err != nil {
		return nil, nil, s.dbErr("select", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ns, key string
		r, _, err := scanRecord(prefixRow{rows, []any{&ns, &key}}, "", "")
		if errs.CodeOf(err) == errs.RecordDamaged {
			s.noteDamage(err)
			continue
		}
		if err != nil {
			return nil, nil, s.dbErr("select", err)
		}
		if f.Match(r) {
			nss, keys = append(nss, ns), append(keys, key)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, s.dbErr("select", err)
	}
	return nss, keys, nil
}

// ResolveMany implements keystore.BulkResolver. A run that writes first
// claims its id (claimBulk). The whole selection is read first (Matched is what a person was shown), then decided batch by
// batch, each batch one transaction that locks its rows in key order
// (single writes lock one key, then the event counter: the same order, so
// no deadlock between them) and is run again when it loses a race. A dry
// run reads the rows without locking and writes nothing. When ctx ends
// between batches, the batches committed stay decided and the result
// says how many.
func (s *Store) ResolveMany(ctx context.Context, req keystore.BulkResolveRequest) (keystore.BulkResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return keystore.BulkResult{}, err
	}
	if !req.DryRun {
		if err := s.claimBulk(ctx, req); err != nil {
			return keystore.BulkResult{}, err
		}
	}
	res := keystore.BulkResult{ID: req.ID, DryRun: req.DryRun, Skipped: map[string]int{}}
	nss, keys, err := s.selectRefs(ctx, req.Filter)
	if err != nil {
		return res, err
	}
	res.Matched = len(keys)
	for len(keys) > 0 {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n := min(keystore.BulkBatch, len(keys))
		var part keystore.BulkResult
		for try := 1; ; try++ {
			part, err = s.resolveBatch(ctx, req, nss[:n], keys[:n])
			if err != nil && retryablePg(err) && try < maxDecisionTries {
				continue
			}
			break
		}
		if err != nil {
			return res, s.dbErr("resolve-bulk", err)
		}
		nss, keys = nss[n:], keys[n:]
		res.Decided += part.Decided
		for why, k := range part.Skipped {
			res.Skipped[why] += k
		}
	}
	return res, nil
}

// claimBulk keeps req's id for its content in guard_bulk, or refuses other
// content under a kept id (keystore.DecideBulkAction). A kept id never
// changes, so an insert that finds the id taken by a guard that claimed it
// meanwhile decides again on what that guard wrote.
func (s *Store) claimBulk(ctx context.Context, req keystore.BulkResolveRequest) error {
	for range 2 {
		var prev *keystore.BulkAction
		var a bulkRow
		err := s.pool.QueryRow(ctx, `SELECT `+bulkColumns+` FROM guard_bulk WHERE id = $1`, req.ID).Scan(a.fields()...)
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
		next, err := keystore.DecideBulkAction(prev, req, now)
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
	return errs.Errorf(errs.Conflict, "bulk id %s was claimed by another request at the same time; nothing changed", req.ID)
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

// resolveBatch decides one batch of a bulk decision in one transaction.
func (s *Store) resolveBatch(ctx context.Context, req keystore.BulkResolveRequest, nss, keys []string) (part keystore.BulkResult, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return part, err
	}
	defer conn.Release()
	open := !req.DryRun // readBatch begins the transaction unless it is a dry run
	defer func() {
		if open {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()
	found, now, err := s.readBatch(ctx, conn.Conn(), req.DryRun, nss, keys)
	if err != nil {
		return part, err
	}
	part, w, err := s.decideBatch(req, nss, keys, found, now)
	if err != nil {
		return part, err
	}
	if req.DryRun || w.Len() == 0 {
		return part, nil // the deferred rollback ends the transaction
	}
	if err := s.commitOn(ctx, keystore.Op{Name: "resolve-bulk", Namespace: nss[0], Key: keys[0]}, conn.Conn(), w); err != nil {
		return part, err
	}
	open = false
	return part, nil
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

// decideBatch decides every key of the batch at now and queues the writes
// of those it changes (none on a dry run), the events after every row.
func (s *Store) decideBatch(req keystore.BulkResolveRequest, nss, keys []string, found map[string]batchRow, now time.Time) (part keystore.BulkResult, w *pgx.Batch, err error) {
	w = &pgx.Batch{}
	var events []keystore.Event
	for i := range keys {
		ns, key := nss[i], keys[i]
		got := found[ns+"\x00"+key]
		if got.damaged {
			part.Count(keystore.SkipDamaged)
			continue
		}
		st, skip, err := keystore.DecideBulkResolve(got.cur, req, s.policies.Namespace(ns), now)
		if err != nil {
			return part, w, err
		}
		part.Count(skip)
		if skip == "" && !req.DryRun {
			if err := queueRecord(w, got.cur, got.version, st.Record); err != nil {
				return part, w, err
			}
			events = append(events, st.Events...)
		}
	}
	// The events last: the event counter row is then locked after every
	// key and count row of the batch, the order single writes lock them in,
	// so a single write never waits on the batch's counter while the batch
	// waits on its row.
	for _, ev := range events {
		queueEvent(w, ev)
	}
	return part, w, nil
}
