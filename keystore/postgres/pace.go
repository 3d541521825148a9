package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// TakeResumeTurn implements keystore.ParkStore: the destination's pace
// row is locked, decided on (each held slot's key read in the same
// transaction) and written in one transaction, so the replicas' resume
// calls of one destination share its rate and slots.
func (s *Store) TakeResumeTurn(ctx context.Context, req keystore.TurnRequest) (t keystore.Turn, ok bool, wait time.Duration, err error) {
	if err := keystore.CheckNamespace("destination", req.Destination); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	dp := s.policies.Destination(req.Destination)
	err = s.paceTx(ctx, "take resume turn", req.Destination, func(tx pgx.Tx, p keystore.Pace, now time.Time) (keystore.Pace, bool) {
		var next keystore.Pace
		next, t, ok, wait = keystore.DecideResumeTurn(p, req, dp, now, func(sl keystore.Slot) bool {
			return s.resumeInFlight(ctx, tx, sl, now)
		})
		return next, ok
	})
	if err != nil {
		return keystore.Turn{}, false, 0, err
	}
	return t, ok, wait, nil
}

// resumeInFlight reads the key a slot is held for (keystore.ResumeInFlight);
// a key that cannot be read holds its slot until the slot's Until.
func (s *Store) resumeInFlight(ctx context.Context, tx pgx.Tx, sl keystore.Slot, now time.Time) bool {
	r := &keystore.Record{Namespace: sl.Namespace, Key: sl.Key}
	var state, reason string
	err := tx.QueryRow(ctx, `SELECT state, reason, lease_expires_at, resume_sent_at, resume_claim_until FROM guard_keys WHERE namespace = $1 AND key = $2`,
		sl.Namespace, sl.Key).Scan(&state, &reason, &r.LeaseExpiresAt, &r.ResumeSentAt, &r.ResumeClaimUntil)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false
	case err != nil:
		return true
	}
	r.State, r.Reason = keystore.State(state), keystore.Reason(reason)
	return keystore.ResumeInFlight(r, now)
}

// EndResumeCall implements keystore.ParkStore.
func (s *Store) EndResumeCall(ctx context.Context, t keystore.Turn) error {
	defer s.paceWake.Notify()
	return s.paceTx(ctx, "end resume call", t.Destination, func(_ pgx.Tx, p keystore.Pace, now time.Time) (keystore.Pace, bool) {
		return keystore.EndCall(p, t, now)
	})
}

// ReleaseResumeTurn implements keystore.ParkStore.
func (s *Store) ReleaseResumeTurn(ctx context.Context, t keystore.Turn) error {
	defer s.paceWake.Notify()
	return s.paceTx(ctx, "release resume turn", t.Destination, func(_ pgx.Tx, p keystore.Pace, now time.Time) (keystore.Pace, bool) {
		return keystore.ReleaseTurn(p, t, now)
	})
}

// PaceAhead implements keystore.ParkStore: 0, the database's clock is
// not the guard's.
func (s *Store) PaceAhead() time.Duration { return 0 }

// PaceFreed implements keystore.ParkStore: this process's releases and
// ends only (another replica's are found by looking again).
func (s *Store) PaceFreed() <-chan struct{} { return s.paceWake.C() }

// paceTx reads dest's pace row locked (made when missing), lets decide
// compute the next pace and writes it when decide says so. now is read
// after the lock: the time of the decision, not of the wait.
func (s *Store) paceTx(ctx context.Context, op, dest string, decide func(tx pgx.Tx, p keystore.Pace, now time.Time) (keystore.Pace, bool)) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.dbErr(op, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `INSERT INTO guard_resume_pace (destination) VALUES ($1) ON CONFLICT (destination) DO NOTHING`, dest); err != nil {
		return s.dbErr(op, err)
	}
	var (
		last  *time.Time
		slots []*time.Time
		raw   []byte
	)
	if err := tx.QueryRow(ctx, `SELECT last_at, slots, pace FROM guard_resume_pace WHERE destination = $1 FOR UPDATE`, dest).Scan(&last, &slots, &raw); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = errors.New("the pace row vanished") // deleted by hand between the two statements
		}
		return s.dbErr(op, err)
	}
	now, err := s.now(ctx, tx)
	if err != nil {
		return s.dbErr(op, err)
	}
	p, err := readPace(last, slots, raw)
	if err != nil {
		return s.dbErr(op, err)
	}
	next, write := decide(tx, p, now)
	if !write {
		return nil
	}
	// last_at and slots as a replica of an older release reads them.
	out := make([]*time.Time, len(next.Slots))
	for i := range next.Slots {
		if !next.Slots[i].Until.IsZero() {
			out[i] = &next.Slots[i].Until
		}
	}
	var lastAt *time.Time
	if !next.Last.IsZero() {
		lastAt = &next.Last
	}
	v, err := json.Marshal(next)
	if err != nil {
		return s.dbErr(op, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE guard_resume_pace SET last_at = $2, slots = $3, pace = $4::jsonb WHERE destination = $1`, dest, lastAt, out, string(v)); err != nil {
		return s.dbErr(op, err)
	}
	return s.dbErrOrNil(op, tx.Commit(ctx))
}

// readPace is the pace of a row: its pace column, or (a row an older
// release wrote) its last_at and slots.
func readPace(last *time.Time, slots []*time.Time, raw []byte) (keystore.Pace, error) {
	var p keystore.Pace
	if raw != nil {
		err := json.Unmarshal(raw, &p)
		return p, err
	}
	p.Slots = make([]keystore.Slot, len(slots))
	if last != nil {
		p.Last = last.UTC()
	}
	for i, v := range slots {
		if v != nil {
			p.Slots[i].Until = v.UTC()
		}
	}
	return p, nil
}
