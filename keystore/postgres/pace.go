package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// TakeResumeTurn implements keystore.ParkStore: the destination's pace
// row is locked, decided on and written in one transaction, so the
// replicas' resume calls of one destination share its rate and slots.
func (s *Store) TakeResumeTurn(ctx context.Context, dest string, hold time.Duration) (t keystore.Turn, ok bool, wait time.Duration, err error) {
	if err := keystore.CheckNamespace("destination", dest); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	dp := s.policies.Destination(dest)
	err = s.paceTx(ctx, "take resume turn", dest, func(p keystore.Pace, now time.Time) (keystore.Pace, bool) {
		var next keystore.Pace
		next, t, ok, wait = keystore.DecideResumeTurn(p, dest, dp, hold, now)
		return next, ok
	})
	if err != nil {
		return keystore.Turn{}, false, 0, err
	}
	return t, ok, wait, nil
}

// ReleaseResumeTurn implements keystore.ParkStore.
func (s *Store) ReleaseResumeTurn(ctx context.Context, t keystore.Turn) error {
	return s.paceTx(ctx, "release resume turn", t.Destination, func(p keystore.Pace, _ time.Time) (keystore.Pace, bool) {
		return keystore.ReleaseTurn(p, t)
	})
}

// paceTx reads dest's pace row locked (made when missing), lets decide
// compute the next pace and writes it when decide says so.
func (s *Store) paceTx(ctx context.Context, op, dest string, decide func(p keystore.Pace, now time.Time) (keystore.Pace, bool)) error {
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
	)
	if err := tx.QueryRow(ctx, `SELECT last_at, slots FROM guard_resume_pace WHERE destination = $1 FOR UPDATE`, dest).Scan(&last, &slots); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = errors.New("the pace row vanished") // deleted by hand between the two statements
		}
		return s.dbErr(op, err)
	}
	now, err := s.now(ctx, tx)
	if err != nil {
		return s.dbErr(op, err)
	}
	p := keystore.Pace{Slots: make([]time.Time, len(slots))}
	if last != nil {
		p.Last = last.UTC()
	}
	for i, v := range slots {
		if v != nil {
			p.Slots[i] = v.UTC()
		}
	}
	next, write := decide(p, now)
	if !write {
		return nil
	}
	out := make([]*time.Time, len(next.Slots))
	for i := range next.Slots {
		if !next.Slots[i].IsZero() {
			out[i] = &next.Slots[i]
		}
	}
	var lastAt *time.Time
	if !next.Last.IsZero() {
		lastAt = &next.Last
	}
	if _, err := tx.Exec(ctx, `UPDATE guard_resume_pace SET last_at = $2, slots = $3 WHERE destination = $1`, dest, lastAt, out); err != nil {
		return s.dbErr(op, err)
	}
	return s.dbErrOrNil(op, tx.Commit(ctx))
}
