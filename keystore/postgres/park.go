package postgres

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Parked keys (keystore/park.go): the catch-up runner reads its queue by
// the start of the wait (ParkedByWait, wait.go); the partial index
// guard_keys_parked (migrations 0005, 0007: keys in the approval life
// cycle are the approval resumer's) serves ParkedCounts. A claim is an ordinary
// decision on the key and its breaker (DecideKey): of several guards claiming
// one key at once, the version check lets exactly one write its claim, and
// the others decide again on the claimed row and are refused.

// The parked phases of keystore/phase.go in SQL, written once.
// queuedSQL: waiting or claimed, the catch-up's queue as ParkedCounts
// counts it (the predicate of the guard_keys_parked index, migration
// 0007: keep them the same so the planner uses it). wokenSQL: resumed, waiting for the execution
// (keystore.Woken). storetest's "parked phases" case holds both to
// keystore.PhaseOf.
const (
	notInApprovalOrLostSQL = `reason NOT IN ('resume_lost', 'awaiting_approval', 'approved', 'approval_rejected')`
	queuedSQL              = `state = 'parked' AND resume_sent_at IS NULL AND ` + notInApprovalOrLostSQL
	wokenSQL               = `state = 'parked' AND parked_at IS NOT NULL AND resume_sent_at IS NOT NULL AND ` + notInApprovalOrLostSQL
)

type parkedRef struct {
	at      time.Time
	ns, key string
}

// parkedRows runs a query of parked rows whose columns are namespace, key,
// a time (the order's) and pgKeyRead: read is how many rows it read,
// damaged ones included (skipped: the keys behind them are read), and
// last the place of the last.
func (s *Store) parkedRows(ctx context.Context, op, sql string, args ...any) (out []*keystore.Record, read int, last parkedRef, err error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, last, s.dbErr(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var ns, key string
		var at time.Time
		r, _, err := scanRecord(prefixRow{rows, []any{&ns, &key, &at}}, "", "")
		read++
		last = parkedRef{at, ns, key}
		if errs.CodeOf(err) == errs.RecordDamaged {
			s.noteDamage(err)
			continue
		}
		if err != nil {
			return nil, 0, last, s.dbErr(op, err)
		}
		r.Namespace, r.Key = ns, key
		out = append(out, r)
	}
	return out, read, last, s.dbErrOrNil(op, rows.Err())
}

// ParkedCounts implements keystore.ParkStore.
func (s *Store) ParkedCounts(ctx context.Context) (map[string]int, error) {
	return s.countParked(ctx, "parked counts", `SELECT destination, count(*) FROM guard_keys WHERE `+queuedSQL+` GROUP BY destination`)
}

// WokenCounts implements keystore.ParkStore: keystore.Woken in SQL.
func (s *Store) WokenCounts(ctx context.Context) (map[string]int, error) {
	return s.countParked(ctx, "woken counts", `SELECT destination, count(*) FROM guard_keys WHERE `+wokenSQL+` GROUP BY destination`)
}

// countParked runs a count of parked keys grouped by destination.
func (s *Store) countParked(ctx context.Context, op, query string) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, query)
	if err != nil {
		return nil, s.dbErr(op, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var dest string
		var n int
		if err := rows.Scan(&dest, &n); err != nil {
			return nil, s.dbErr(op, err)
		}
		out[dest] = n
	}
	return out, s.dbErrOrNil(op, rows.Err())
}

func (s *Store) dbErrOrNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return s.dbErr(op, err)
}

var _ keystore.ParkStore = (*Store)(nil)
