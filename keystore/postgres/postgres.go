package postgres

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/migrate"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Options configure Open.
type Options struct {
	Policies keystore.Policies
	// Clock, when set, replaces the database's clock (tests pass a
	// controllable one). When nil, every decision takes its time from the
	// database (clock_timestamp(), read after the rows are locked), so all
	// replicas judge leases and breaker cooldowns by one clock.
	Clock  keystore.Clock
	Logger *slog.Logger
	// MaxConns bounds the pool (default 16, or pool_max_conns in the URL).
	MaxConns int32
	// SweepBatch bounds the rows of one sweep transaction (default 1000).
	SweepBatch int
	// Damaged is called once per row (and process) that fails its
	// checksum, for a metric; each is also logged with its key.
	Damaged func()
}

// Store is the keystore.Store on PostgreSQL, for deployments with several
// n8n-guard processes (queue-mode workers, two hosts behind a load
// balancer): every process on one database behaves as one.
//
// Every call reads the key (and the destination's breaker) and the
// database's time, lets keystore's state machine decide, and
// writes the Step in one transaction that fails if what it read has
// changed meanwhile (see DecideKey). The state machine is the same one the
// bbolt store uses; this file only loads, locks and saves. Two writers
// that both find a key absent cannot both insert it: the primary key
// refuses the second, which is then run again and finds the key.
type Store struct {
	keystore.Operations // Reserve, Complete, …: decided over DecideKey, DecideBreaker

	pool       *pgxpool.Pool
	policies   keystore.Policies
	clock      keystore.Clock // nil: the database's clock
	log        *slog.Logger
	sweepBatch int
	dups       keystore.DuplicateTally // duplicate answers not yet counted in the database
	damaged    func()                  // Options.Damaged
	damage     sync.Map                // messages of the damaged rows already logged
	told       sync.WaitGroup          // events about damaged rows being written (Close waits)
	commits    keystore.CommitSignal   // told after each transaction that wrote (this process's only)
	paceWake   keystore.Wake           // told when this process frees a slot or ends a call (pace.go)
}

// Commits implements keystore.CommitFeed. Another replica's commits are
// not seen: its workers' tickers find them.
func (s *Store) Commits() (<-chan struct{}, func()) { return s.commits.Subscribe() }

// CommittedKeys implements keystore.KeyedCommitFeed, for this process's
// commits as Commits.
func (s *Store) CommittedKeys(match func(keystore.CommittedKey) bool) *keystore.KeyedCommits {
	return s.commits.SubscribeKeys(match)
}

var _ keystore.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a
// libpq key=value string), applies the schema migrations that are missing
// and returns the store.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, errors.New("open postgres store: the URL is not a valid postgres:// URL or connection string")
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns"):
		// pgxpool's default (the number of CPUs) is too small for a
		// server that holds a connection through every commit's fsync.
		cfg.MaxConns = 16
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "n8n-guard"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := checkPooler(ctx, pool); err != nil { // pooler.go
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := migrate.Run(ctx, pool, schema(), opts.Logger); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s := &Store{pool: pool, policies: opts.Policies, clock: opts.Clock, log: opts.Logger,
		sweepBatch: opts.SweepBatch, damaged: opts.Damaged}
	s.Operations = keystore.Operations{Driver: s, Policies: opts.Policies, Duplicates: &s.dups}
	if err := addChecksums(ctx, s); err != nil { // checksum.go
		pool.Close()
		return nil, fmt.Errorf("open postgres store: add checksums to the rows of an older version: %w", err)
	}
	return s, nil
}

// Pool returns the connection pool, for packages that keep their own
// tables in the same database.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool; it waits for the connections in use.
func (s *Store) Close() error {
	s.told.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := s.foldActivity(ctx); err != nil {
		s.log.Warn("store: the last duplicate counts of the activity chart were not written", "err", err)
	}
	cancel()
	s.pool.Close()
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return s.dbErr("ping", err)
	}
	return nil
}

// Column lists, in the order scanRecord and scanBreaker read them.
const (
	pgKeyCols = `state, attempt, owner, lease_expires_at, result_ref, result, reason, message, retryable,
		via, destination, created_at, updated_at, expires_at, resolved_by, resolved_at, note, history,
		fingerprint, token_hash, token_seal, parked_at, resume_url, resume_sent_at, resume_claim_until, check_hold, summary,
		parked_since, stage`
	pgKeyRead     = pgKeyCols + `, version, checksum`
	pgSelectKey   = `SELECT ` + pgKeyRead + ` FROM guard_keys WHERE namespace = $1 AND key = $2`
	pgBreakerCols = `state, opened_at, reopens_at, consecutive_failures, paused_reserves, probe_namespace, probe_key, probe_until,
		hold_by, hold_reason, hold_set_at, hold_until, reset_by, reset_reason, reset_at, failed_keys, views, seen_namespaces, opened_by`
	pgSelectBreaker = `SELECT ` + pgBreakerCols + ` FROM guard_breakers WHERE destination = $1`
	// The breaker of the destination the key names (complete, fail).
	pgSelectBreakerOfKey = `SELECT destination, ` + pgBreakerCols + ` FROM guard_breakers
		WHERE destination = (SELECT destination FROM guard_keys WHERE namespace = $1 AND key = $2)`
	pgClock = `SELECT clock_timestamp()`
)

// scanRecord reads one row of pgKeyRead; nil when there is none.
func scanRecord(row pgx.Row, ns, key string) (*keystore.Record, int64, error) {
	r := &keystore.Record{Namespace: ns, Key: key}
	var state, reason, via, stage string
	var attempt int32
	var result, history, hold []byte
	var version int64
	var sum *int64
	err := row.Scan(&state, &attempt, &r.Owner, &r.LeaseExpiresAt, &r.ResultRef, &result, &reason, &r.Message,
		&r.Retryable, &via, &r.Destination, &r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt, &r.ResolvedBy,
		&r.ResolvedAt, &r.Note, &history, &r.Fingerprint, &r.TokenHash, &r.TokenSeal,
		&r.ParkedAt, &r.ResumeURL, &r.ResumeSentAt, &r.ResumeClaimUntil, &hold, &r.Summary, &r.ParkedSince, &stage, &version, &sum)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if p, ok := row.(prefixRow); ok && len(p.prefix) >= 2 {
		// A listing: the namespace and key came in the first columns.
		ns, key = *p.prefix[0].(*string), *p.prefix[1].(*string)
		r.Namespace, r.Key = ns, key
	}
	r.State, r.Attempt, r.Reason, r.Via = keystore.State(state), int(attempt), keystore.Reason(reason), keystore.Via(via)
	r.Stage = keystore.Stage(stage)
	if len(result) > 0 {
		r.Result = json.RawMessage(result)
	}
	if err := json.Unmarshal(history, &r.History); err != nil {
		if sum != nil {
			return nil, version, keystore.RecordDamaged(ns, key)
		}
		return nil, 0, fmt.Errorf("decode history of %s/%s: %w", ns, key, err)
	}
	if r.History == nil {
		r.History = []keystore.Transition{}
	}
	if len(hold) > 0 {
		if err := json.Unmarshal(hold, &r.Check); err != nil {
			return nil, version, keystore.RecordDamaged(ns, key)
		}
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	r.LeaseExpiresAt, r.ExpiresAt, r.ResolvedAt = utcPtr(r.LeaseExpiresAt), utcPtr(r.ExpiresAt), utcPtr(r.ResolvedAt)
	r.ParkedAt, r.ResumeSentAt, r.ResumeClaimUntil = utcPtr(r.ParkedAt), utcPtr(r.ResumeSentAt), utcPtr(r.ResumeClaimUntil)
	r.ParkedSince = utcPtr(r.ParkedSince)
	// NULL: a row from before checksums (Open adds them) or written by an
	// older n8n-guard during an upgrade (the trigger of migration 0004).
	if sum != nil && *sum != rowChecksum(r, version) {
		return nil, version, keystore.RecordDamaged(ns, key)
	}
	return r, version, nil
}

// scanBreaker reads one row of pgBreakerCols; found is false when the
// destination has no row (a closed breaker nothing has happened to).
func scanBreaker(row pgx.Row, dest string) (b *keystore.Breaker, found bool, err error) {
	b = keystore.NewBreaker(dest)
	var state string
	var failures, paused int32
	var hold keystore.Maintenance
	var holdSetAt, holdUntil, resetAt *time.Time
	var reset keystore.BreakerReset
	var views []byte
	err = row.Scan(&state, &b.OpenedAt, &b.ReopensAt, &failures, &paused, &b.ProbeNamespace, &b.ProbeKey, &b.ProbeUntil,
		&hold.By, &hold.Reason, &holdSetAt, &holdUntil, &reset.By, &reset.Reason, &resetAt, &b.FailedKeys, &views, &b.SeenNamespaces, &b.OpenedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return keystore.NewBreaker(dest), false, nil
	}
	if err != nil {
		return nil, false, err
	}
	b.State, b.ConsecutiveFailures, b.PausedReserves = keystore.BreakerState(state), int(failures), int(paused)
	if len(b.FailedKeys) == 0 {
		b.FailedKeys = nil
	}
	if len(b.SeenNamespaces) == 0 {
		b.SeenNamespaces = nil
	}
	if b.Views, err = keystore.DecodeViews(views); err != nil {
		return nil, false, fmt.Errorf("decode the views of breaker %s: %w", dest, err)
	}
	b.OpenedAt, b.ReopensAt, b.ProbeUntil = utcPtr(b.OpenedAt), utcPtr(b.ReopensAt), utcPtr(b.ProbeUntil)
	if hold.By != "" && holdSetAt != nil && holdUntil != nil {
		hold.SetAt, hold.Until = holdSetAt.UTC(), holdUntil.UTC()
		b.Maintenance = &hold
	}
	if reset.By != "" && resetAt != nil {
		reset.At = resetAt.UTC()
		b.Reset = &reset
	}
	return b, true, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

// nullJSON passes an empty document as SQL NULL.
func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// queueRecord queues the write of next over prev (nil: a new key), read
// at version. An insert of a key another writer inserted first fails on
// the primary key; an update of a row another writer changed first finds
// no row at version, and guard_expect_row aborts the transaction. Either
// way the decision is run again on the winner's row.
func queueRecord(b *pgx.Batch, prev *keystore.Record, version int64, next *keystore.Record) error {
	// The one place a row is written: its stage is what its fields say
	// (keystore/stage.go), whichever path decided it.
	next.Stage = keystore.StageOf(next)
	history, err := json.Marshal(next.History)
	if err != nil {
		return err
	}
	stored := atMicros(next) // what the database keeps, and what the checksum covers
	args := []any{next.Namespace, next.Key, string(next.State), next.Attempt, next.Owner, stored.LeaseExpiresAt,
		next.ResultRef, nullJSON(next.Result), string(next.Reason), next.Message, next.Retryable, string(next.Via),
		next.Destination, stored.CreatedAt, stored.UpdatedAt, stored.ExpiresAt, next.ResolvedBy, stored.ResolvedAt,
		next.Note, string(history), nullBytes(next.Fingerprint), nullBytes(next.TokenHash), nullBytes(next.TokenSeal),
		stored.ParkedAt, next.ResumeURL, stored.ResumeSentAt, stored.ResumeClaimUntil, checkHold(next.Check), next.Summary,
		stored.ParkedSince, string(next.Stage)}
	if prev == nil {
		args = append(args, rowChecksum(stored, 1))
		b.Queue(`INSERT INTO guard_keys (namespace, key, `+pgKeyCols+`, checksum)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23,
				$24, $25, $26, $27, $28, $29, $30, $31, $32)`, args...)
		queueActivity(b, prev, next)
		return nil
	}
	args = append(args, version, rowChecksum(stored, version+1))
	b.Queue(`WITH u AS (
			UPDATE guard_keys SET state = $3, attempt = $4, owner = $5, lease_expires_at = $6, result_ref = $7,
				result = $8, reason = $9, message = $10, retryable = $11, via = $12, destination = $13,
				created_at = $14, updated_at = $15, expires_at = $16, resolved_by = $17, resolved_at = $18,
				note = $19, history = $20, fingerprint = $21, token_hash = $22, token_seal = $23,
				parked_at = $24, resume_url = $25, resume_sent_at = $26, resume_claim_until = $27, check_hold = $28,
				summary = $29, parked_since = $30, stage = $31, version = version + 1, checksum = $33
			WHERE namespace = $1 AND key = $2 AND version = $32
			RETURNING 1)
		SELECT guard_expect_row(count(*), 'key') FROM u`, args...)
	queueActivity(b, prev, next)
	return nil
}

// queueBreaker queues the write of a breaker the decision changed.
func queueBreaker(b *pgx.Batch, br *keystore.Breaker, exists bool) {
	var hold keystore.Maintenance
	var holdSetAt, holdUntil *time.Time
	if m := br.Maintenance; m != nil {
		hold, holdSetAt, holdUntil = *m, &m.SetAt, &m.Until
	}
	var reset keystore.BreakerReset
	var resetAt *time.Time
	if r := br.Reset; r != nil {
		reset, resetAt = *r, &r.At
	}
	args := []any{br.Destination, string(br.State), br.OpenedAt, br.ReopensAt, br.ConsecutiveFailures,
		br.PausedReserves, br.ProbeNamespace, br.ProbeKey, br.ProbeUntil, hold.By, hold.Reason, holdSetAt, holdUntil,
		reset.By, reset.Reason, resetAt, failedKeys(br), viewsColumn(br), seenColumn(br), br.OpenedBy}
	if !exists {
		b.Queue(`INSERT INTO guard_breakers (destination, `+pgBreakerCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`, args...)
		return
	}
	b.Queue(`UPDATE guard_breakers SET state = $2, opened_at = $3, reopens_at = $4, consecutive_failures = $5,
		paused_reserves = $6, probe_namespace = $7, probe_key = $8, probe_until = $9,
		hold_by = $10, hold_reason = $11, hold_set_at = $12, hold_until = $13,
		reset_by = $14, reset_reason = $15, reset_at = $16, failed_keys = $17, views = $18, seen_namespaces = $19, opened_by = $20 WHERE destination = $1`, args...)
}

// viewsColumn is the breaker's views as the jsonb column keeps them.
func viewsColumn(br *keystore.Breaker) string {
	if v := keystore.EncodeViews(br.Views); v != nil {
		return string(v)
	}
	return "[]"
}

// seenColumn is the namespaces seen as the column keeps them: an array,
// empty rather than NULL.
func seenColumn(br *keystore.Breaker) []string {
	if br.SeenNamespaces == nil {
		return []string{}
	}
	return br.SeenNamespaces
}

// failedKeys is the breaker's counted keys as the column keeps them: an
// array, empty rather than NULL.
func failedKeys(br *keystore.Breaker) []string {
	if br.FailedKeys == nil {
		return []string{}
	}
	return br.FailedKeys
}

// queueEvent appends an event. The counter row stays locked until commit,
// so events commit in seq order (see the migration).
func queueEvent(b *pgx.Batch, ev keystore.Event) {
	b.Queue(`WITH s AS (UPDATE guard_event_seq SET seq = seq + 1 RETURNING seq)
		INSERT INTO guard_events (seq, at, kind, namespace, key, attempt, owner, destination, reason, message, reopens_at, paused_reserves, bulk, summary, resumed, lost, took_ms)
		SELECT s.seq, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 FROM s`,
		ev.At, string(ev.Kind), ev.Namespace, ev.Key, ev.Attempt, ev.Owner, ev.Destination, string(ev.Reason),
		ev.Message, ev.ReopensAt, ev.PausedReserves, ev.Bulk, ev.Summary, ev.Resumed, ev.Lost, ev.Took.Milliseconds())
}

// breakerChanged reports whether a decision changed the breaker, so that
// it must be written (and so locked).
func breakerChanged(prev, next *keystore.Breaker, exists bool) bool {
	if next == nil {
		return false
	}
	if !exists && next.State == keystore.BreakerClosed && next.ConsecutiveFailures == 0 && next.PausedReserves == 0 &&
		len(next.SeenNamespaces) == 0 && len(next.Views) == 0 {
		return false // an idle breaker is not stored, as on bbolt
	}
	return prev == nil || prev.State != next.State || prev.ConsecutiveFailures != next.ConsecutiveFailures ||
		prev.PausedReserves != next.PausedReserves || prev.ProbeNamespace != next.ProbeNamespace || prev.ProbeKey != next.ProbeKey ||
		!sameTime(prev.OpenedAt, next.OpenedAt) || !sameTime(prev.ReopensAt, next.ReopensAt) || !sameTime(prev.ProbeUntil, next.ProbeUntil) ||
		(prev.Maintenance == nil) != (next.Maintenance == nil) || (prev.Reset == nil) != (next.Reset == nil) ||
		!slices.Equal(prev.FailedKeys, next.FailedKeys) || !slices.Equal(prev.SeenNamespaces, next.SeenNamespaces) || prev.OpenedBy != next.OpenedBy ||
		!bytes.Equal(keystore.EncodeViews(prev.Views), keystore.EncodeViews(next.Views))
}

// sameTime compares two optional times as the database keeps them.
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// what a decision read: the key's row and version, the breaker.
type readSet struct {
	cur      *keystore.Record
	version  int64
	br       *keystore.Breaker // nil: the decision takes no breaker
	brExists bool
	now      time.Time
}

// maxDecisionTries bounds the re-runs after a lost race (an insert of a
// key another writer inserted first, a version that moved, a deadlock);
// each re-run reads the winner's row, so two or three tries are usual
// even under a storm of copies.
const maxDecisionTries = 20

// errNeedBreakerLock says the decision changes a breaker: run it on the
// locked path, which holds the breaker row for the whole transaction.
type errNeedBreakerLock struct{ dest string }

func (e errNeedBreakerLock) Error() string { return "breaker " + e.dest + " needs its lock" }

// DecideKey implements keystore.Driver. It carries out one decision, in
// one of two ways.
//
// The optimistic path reads the key (and breaker) without locks in one
// round trip and decides. Most answers write nothing (in_progress,
// duplicate_event, a replay): they are done, having locked nothing, so a
// storm of copies of one key does not queue on its row. A decision that
// writes the key sends, in one more round trip and one transaction, the
// write conditioned on the version it read (and its events); if another
// writer came first (the version moved, or it inserted the key),
// guard_expect_row or the primary key aborts the transaction and the
// decision is run again on the winner's row. Exactly one of any number of
// simultaneous reserves can therefore be accepted, and no answer is given
// before its write is committed.
//
// A decision that changes a breaker (a failure, a paused reserve, a
// probe) takes the locked path instead: the breaker row is locked before
// the key row, always in that order, so concurrent reserves of an open or
// half-open breaker are decided one after the other (one probe only) and
// no two transactions wait on each other in a circle.
func (s *Store) DecideKey(ctx context.Context, op keystore.Op) (keystore.Result, error) {
	lockDest, locked := "", false
	for try := 1; ; try++ {
		var res keystore.Result
		var err error
		if locked {
			res, err = s.runLocked(ctx, op, lockDest)
		} else {
			res, err = s.runOptimistic(ctx, op)
		}
		var need errNeedBreakerLock
		switch {
		case errors.As(err, &need) && try < maxDecisionTries:
			lockDest, locked = need.dest, true
			continue
		case err != nil && retryablePg(err) && try < maxDecisionTries:
			continue
		case err != nil:
			return keystore.Result{}, s.dbErr(op.Name, err)
		}
		return res, nil
	}
}

func (s *Store) runOptimistic(ctx context.Context, op keystore.Op) (keystore.Result, error) {
	b := &pgx.Batch{}
	b.Queue(pgSelectKey, op.Namespace, op.Key)
	switch {
	case op.Breaker == keystore.RecordBreaker:
		b.Queue(pgSelectBreakerOfKey, op.Namespace, op.Key)
	case op.Breaker == keystore.RequestBreaker && op.Destination != "":
		b.Queue(pgSelectBreaker, op.Destination)
	}
	if s.clock == nil {
		b.Queue(pgClock)
	}
	var rs readSet
	err := func() (err error) {
		br := s.pool.SendBatch(ctx, b)
		defer func() {
			if cerr := br.Close(); err == nil {
				err = cerr
			}
		}()
		if rs.cur, rs.version, err = scanRecord(br.QueryRow(), op.Namespace, op.Key); err != nil {
			return err
		}
		switch {
		case op.Breaker == keystore.RecordBreaker:
			var dest string
			b, exists, err := scanBreaker(prefixRow{row: br.QueryRow(), prefix: []any{&dest}}, "")
			if err != nil {
				return err
			}
			if rs.cur != nil && rs.cur.Destination != "" {
				if exists && dest != rs.cur.Destination {
					// The key was re-reserved for another destination
					// between the two reads.
					return &pgconn.PgError{Code: "40001", Message: "key moved to another destination"}
				}
				b.Destination = rs.cur.Destination
				rs.br, rs.brExists = b, exists
			}
		case op.Breaker == keystore.RequestBreaker && op.Destination != "":
			if rs.br, rs.brExists, err = scanBreaker(br.QueryRow(), op.Destination); err != nil {
				return err
			}
		}
		rs.now, err = s.scanNow(br)
		return err
	}()
	if err != nil {
		return keystore.Result{}, err
	}
	st, err := op.Decide(rs.cur, rs.br, rs.now)
	if err != nil {
		return keystore.Result{}, err // a domain error: nothing to write
	}
	if breakerChanged(rs.br, st.Breaker, rs.brExists) {
		return keystore.Result{}, errNeedBreakerLock{st.Breaker.Destination}
	}
	w := &pgx.Batch{}
	if n, err := queueStep(w, rs, st, false); err != nil || n == 0 {
		return st.Result, err
	}
	// No BEGIN/COMMIT: the statements of one pipeline up to its Sync are
	// one implicit transaction, committed at the Sync or rolled back
	// whole by the first error. Two statements fewer per write.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.pool.SendBatch(wctx, w).Close(); err != nil {
		return keystore.Result{}, err
	}
	s.commits.Notify(st.Committed()...)
	return st.Result, nil
}

// runLocked locks the breaker of lockDest, then the key, and decides.
func (s *Store) runLocked(ctx context.Context, op keystore.Op, lockDest string) (res keystore.Result, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return keystore.Result{}, err
	}
	// A connection released inside a transaction is closed by the pool
	// (which rolls back); the explicit rollback keeps it.
	defer conn.Release()
	open := true
	defer func() {
		if open {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(pgSelectBreaker+" FOR UPDATE", lockDest)
	b.Queue(pgSelectKey+" FOR UPDATE", op.Namespace, op.Key)
	if s.clock == nil {
		// After the locks: the time of the decision, not of the wait.
		b.Queue(pgClock)
	}
	var rs readSet
	err = func() (err error) {
		br := conn.SendBatch(ctx, b)
		defer func() {
			if cerr := br.Close(); err == nil {
				err = cerr
			}
		}()
		if _, err = br.Exec(); err != nil {
			return err
		}
		if rs.br, rs.brExists, err = scanBreaker(br.QueryRow(), lockDest); err != nil {
			return err
		}
		if rs.cur, rs.version, err = scanRecord(br.QueryRow(), op.Namespace, op.Key); err != nil {
			return err
		}
		rs.now, err = s.scanNow(br)
		return err
	}()
	if err != nil {
		return keystore.Result{}, err
	}
	if op.Breaker == keystore.RecordBreaker {
		switch {
		case rs.cur == nil || rs.cur.Destination == "":
			rs.br = nil
		case rs.cur.Destination != lockDest:
			return keystore.Result{}, errNeedBreakerLock{rs.cur.Destination}
		}
	}
	st, err := op.Decide(rs.cur, rs.br, rs.now)
	if err != nil {
		return keystore.Result{}, err
	}
	changed := breakerChanged(rs.br, st.Breaker, rs.brExists)
	if changed && st.Breaker.Destination != lockDest {
		return keystore.Result{}, errNeedBreakerLock{st.Breaker.Destination}
	}
	w := &pgx.Batch{}
	if n, err := queueStep(w, rs, st, changed); err != nil || n == 0 {
		return st.Result, err // nothing to write: the deferred rollback releases the locks
	}
	if err := s.commitOn(ctx, op, conn.Conn(), w, st.Committed()); err != nil {
		return keystore.Result{}, err
	}
	open = false
	return st.Result, nil
}

// DecideBreaker implements keystore.Driver: the breaker row is locked
// for the decision, as every breaker change is.
func (s *Store) DecideBreaker(ctx context.Context, op keystore.BreakerOp) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.dbErr(op.Name, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	br, exists, err := scanBreaker(tx.QueryRow(ctx, pgSelectBreaker+` FOR UPDATE`, op.Destination), op.Destination)
	if err != nil {
		return s.dbErr(op.Name, err)
	}
	now, err := s.now(ctx, tx)
	if err != nil {
		return s.dbErr(op.Name, err)
	}
	st, err := op.Decide(br, exists, now)
	if err != nil || len(st.Events) == 0 && !breakerChanged(br, st.Breaker, exists) {
		return err // nothing to write: the deferred rollback releases the lock
	}
	w := &pgx.Batch{}
	if _, err := queueStep(w, readSet{brExists: exists}, st, true); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, w).Close(); err != nil {
		return s.dbErr(op.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.dbErr(op.Name, err)
	}
	s.commits.Notify(st.Committed()...) // a hold, its end or a reset: the catch-up acts on it
	return nil
}

func (s *Store) scanNow(br pgx.BatchResults) (time.Time, error) {
	if s.clock != nil {
		return s.clock().UTC().Truncate(time.Millisecond), nil
	}
	var now time.Time
	err := br.QueryRow().Scan(&now)
	return now.UTC().Truncate(time.Millisecond), err
}

// queueStep queues the writes of a Step in lock order: breaker, key,
// events (whose counter row is locked last). It returns how many.
func queueStep(w *pgx.Batch, rs readSet, st keystore.Step, writeBreaker bool) (int, error) {
	n := w.Len()
	if writeBreaker {
		queueBreaker(w, st.Breaker, rs.brExists)
	}
	if st.Record != nil {
		if err := queueRecord(w, rs.cur, rs.version, st.Record); err != nil {
			return 0, err
		}
	}
	for _, ev := range st.Events {
		queueEvent(w, ev)
	}
	return w.Len() - n, nil
}

// commitOn sends the queued writes and COMMIT in one round trip. Once
// the writes are sent they may take effect, so the answer is waited for
// even if the caller has gone (here and in runOptimistic): an accepted
// reservation nobody hears about would hold the key until its lease runs
// out.
// commitOn sends w and the COMMIT on conn, then tells the commit signal
// keys (none: the write does not say).
func (s *Store) commitOn(ctx context.Context, op keystore.Op, conn *pgx.Conn, w *pgx.Batch, keys []keystore.CommittedKey) error {
	var tag pgconn.CommandTag
	w.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := conn.SendBatch(wctx, w).Close(); err != nil {
		return err
	}
	if tag.String() != "COMMIT" {
		return fmt.Errorf("%s %s/%s: commit answered %q", op.Name, op.Namespace, op.Key, tag.String())
	}
	s.commits.Notify(keys...)
	return nil
}

// retryablePg reports whether a transaction failed only because another
// one won a race, so that running it again will decide on the winner's row.
func retryablePg(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "23505", // unique_violation: another transaction inserted the key or breaker first
		"40001", // serialization_failure
		"40P01": // deadlock_detected
		return true
	}
	return false
}

// dbErr turns a database error into the domain's: domain errors pass
// through, an unreachable database is store_unavailable, anything else is
// internal. Details go to the log, never to the caller.
func (s *Store) dbErr(op string, err error) error {
	var de *errs.Error
	if errors.As(err, &de) {
		s.noteDamage(err)
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "53", "57", "58": // connection, resources, operator intervention, system
		default:
			s.log.Error("postgres store", "op", op, "err", err)
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	s.log.Error("postgres store unavailable", "op", op, "err", err)
	return &errs.Error{Code: errs.StoreUnavailable, Message: "the store (PostgreSQL) could not be reached or did not confirm the change"}
}

// Lookup implements Store.
func (s *Store) Lookup(ctx context.Context, ns, key string) (keystore.Result, error) {
	key, err := keystore.CheckIdentity(ns, key)
	if err != nil {
		return keystore.Result{}, err
	}
	cur, _, err := scanRecord(s.pool.QueryRow(ctx, pgSelectKey, ns, key), ns, key)
	if err != nil {
		return keystore.Result{}, s.dbErr("lookup", err)
	}
	if cur == nil {
		return keystore.Result{Namespace: ns, Key: key, Outcome: keystore.OutcomeAbsent}, nil
	}
	return keystore.Result{Namespace: ns, Key: key, Outcome: keystore.OutcomeFound, Record: cur}, nil
}

// List implements Store. Records come in (namespace, key) order, bytewise;
// the cursor is the last key of the page, as on bbolt.
func (s *Store) List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error) {
	q, err := q.Normalize()
	if err != nil {
		return keystore.Page{}, err
	}
	after, err := parseListCursor(q)
	if err != nil {
		return keystore.Page{}, err
	}
	sql, args := listSQL(q, after)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return keystore.Page{}, s.dbErr("list", err)
	}
	defer rows.Close()
	var page keystore.Page
	for rows.Next() {
		if len(page.Items) == q.Limit {
			page.NextCursor = listCursorOf(page.Items[len(page.Items)-1], q.Oldest)
			break
		}
		var ns, key string
		r, _, err := scanRecord(prefixRow{rows, []any{&ns, &key}}, "", "")
		if errs.CodeOf(err) == errs.RecordDamaged {
			s.noteDamage(err) // left out of listings; its key answers record_damaged
			continue
		}
		if err != nil {
			return keystore.Page{}, s.dbErr("list", err)
		}
		page.Items = append(page.Items, r)
	}
	if err := rows.Err(); err != nil {
		return keystore.Page{}, s.dbErr("list", err)
	}
	return page, nil
}

// listAfter is where a page of List starts: after this row (set is false
// on the first page).
type listAfter struct {
	set     bool
	ns, key string
	at      time.Time // oldest first: the cursor starts with updated_at
}

// parseListCursor reads q.Cursor as listCursorOf wrote it, refusing a
// cursor of another listing so a page never silently skips rows.
func parseListCursor(q keystore.ListQuery) (listAfter, error) {
	var after listAfter
	if q.Cursor == "" {
		return after, nil
	}
	after.set = true
	raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil {
		return after, errs.InvalidField("cursor", "cursor", "cursor is not one this server returned")
	}
	rest := string(raw)
	if q.Oldest {
		at, tail, ok := strings.Cut(rest, "\x00")
		us, perr := strconv.ParseInt(at, 10, 64)
		if !ok || perr != nil {
			return after, errs.InvalidField("cursor", "cursor", "cursor belongs to another listing")
		}
		after.at, rest = time.UnixMicro(us).UTC(), tail
	}
	var ok bool
	if after.ns, after.key, ok = strings.Cut(rest, "\x00"); !ok {
		return after, errs.InvalidField("cursor", "cursor", "cursor is not one this server returned")
	}
	if q.Namespace != "" && after.ns != q.Namespace {
		return after, errs.InvalidField("cursor", "cursor", "cursor belongs to another listing")
	}
	return after, nil
}

// listCursorOf is the cursor after last, the row parseListCursor reads back.
func listCursorOf(last *keystore.Record, oldest bool) string {
	cursor := last.Namespace + "\x00" + last.Key
	if oldest {
		cursor = strconv.FormatInt(last.UpdatedAt.UnixMicro(), 10) + "\x00" + cursor
	}
	return base64.RawURLEncoding.EncodeToString([]byte(cursor))
}

// listSQL is the query of one page of q after the cursor, one row more than
// the page so List knows whether there is a next one; its conditions
// repeat the partial indexes' so the planner can use them.
func listSQL(q keystore.ListQuery, after listAfter) (string, []any) {
	sql := `SELECT namespace, key, ` + pgKeyRead + ` FROM guard_keys WHERE true`
	var args []any
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if q.State != "" {
		sql += ` AND state = ` + arg(string(q.State))
		if q.State != keystore.StateCompleted {
			sql += ` AND state <> 'completed'` // lets the planner use the open-states index
		}
	}
	if q.Namespace != "" {
		sql += ` AND namespace = ` + arg(q.Namespace)
	}
	if q.KeyPrefix != "" {
		sql += ` AND key LIKE ` + arg(likePrefix(q.KeyPrefix))
	}
	if q.Owner != "" {
		sql += ` AND owner = ` + arg(q.Owner)
		if q.State != keystore.StateReserved {
			sql += ` AND owner <> '' AND state IN ('failed', 'unknown')` // the owner index's rows
		}
	}
	order := `namespace, key`
	if q.Oldest {
		order = `updated_at, namespace, key`
	}
	if after.set && q.Oldest {
		sql += fmt.Sprintf(` AND (updated_at, namespace, key) > (%s, %s, %s)`, arg(after.at), arg(after.ns), arg(after.key))
	} else if after.set {
		sql += fmt.Sprintf(` AND (namespace, key) > (%s, %s)`, arg(after.ns), arg(after.key))
	}
	sql += ` ORDER BY ` + order + ` LIMIT ` + arg(q.Limit+1)
	return sql, args
}

// prefixRow scans leading columns into prefix, the rest into the
// caller's destinations.
type prefixRow struct {
	row    pgx.Row
	prefix []any
}

func (p prefixRow) Scan(dest ...any) error {
	return p.row.Scan(append(p.prefix, dest...)...)
}

// likePrefix is a LIKE pattern matching strings that begin with p: its
// wildcards and the escape character are escaped.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}
