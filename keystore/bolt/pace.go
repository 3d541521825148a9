package bolt

import (
	"context"
	"encoding/json"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// The resume pace of each destination (keystore/pace.go) lives in the
// file, in bucket pace: after a restart, or a store reopened in the same
// process, the slots of the resumed executions still in flight stay held
// (each slot's key tells: keystore.ResumeInFlight), and the calls of the
// last window still count. Its writes are ordinary writes of the group
// commit, decided on the writer's goroutine, so two runners on one store
// take turns in one pace.
var bucketPace = []byte("pace") // destination -> JSON keystore.Pace

// TakeResumeTurn implements keystore.ParkStore.
func (s *Store) TakeResumeTurn(_ context.Context, req keystore.TurnRequest) (t keystore.Turn, ok bool, wait time.Duration, err error) {
	if err := keystore.CheckNamespace("destination", req.Destination); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	dp := s.policies.Destination(req.Destination)
	decide := func(tx *bbolt.Tx, p keystore.Pace, now time.Time) (keystore.Pace, bool) {
		var next keystore.Pace
		next, t, ok, wait = keystore.DecideResumeTurn(p, req, dp, now, func(sl keystore.Slot) bool {
			rec, err := getRecord(tx, sl.Namespace, sl.Key)
			return err != nil || keystore.ResumeInFlight(rec, now) // a damaged record holds its slot until Until
		})
		return next, ok
	}
	// A look in a read transaction first: a refused turn costs no commit
	// (a waiting call asks again and again). A turn it would give is
	// decided again in the writer's transaction, which alone writes.
	if err := s.view(func(tx *bbolt.Tx) error {
		decide(tx, s.readPace(tx, req.Destination), s.now())
		return nil
	}); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	if !ok {
		return keystore.Turn{}, false, wait, nil
	}
	if err := s.pace(req.Destination, decide); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	return t, ok, wait, nil
}

// EndResumeCall implements keystore.ParkStore. The end is read off the
// clock when the op is decided, not the group's time, which may be from
// before the call returned.
func (s *Store) EndResumeCall(_ context.Context, t keystore.Turn) error {
	defer s.paceWake.Notify()
	return s.pace(t.Destination, func(_ *bbolt.Tx, p keystore.Pace, _ time.Time) (keystore.Pace, bool) {
		return keystore.EndCall(p, t, s.clock().UTC().Truncate(time.Millisecond))
	})
}

// ReleaseResumeTurn implements keystore.ParkStore.
func (s *Store) ReleaseResumeTurn(_ context.Context, t keystore.Turn) error {
	defer s.paceWake.Notify()
	return s.pace(t.Destination, func(_ *bbolt.Tx, p keystore.Pace, _ time.Time) (keystore.Pace, bool) {
		return keystore.ReleaseTurn(p, t, s.clock().UTC().Truncate(time.Millisecond))
	})
}

// PaceFreed implements keystore.ParkStore.
func (s *Store) PaceFreed() <-chan struct{} { return s.paceWake.C() }

// pace reads dest's pace in the writer's transaction, lets decide compute
// the next one and writes it when decide says so. A pace that cannot be
// read (damaged by hand) starts empty, said once in the log: a destination
// whose catch-up never ends is worse than one window's calls forgotten.
func (s *Store) pace(dest string, decide func(tx *bbolt.Tx, p keystore.Pace, now time.Time) (keystore.Pace, bool)) error {
	_, err := s.write(func(tx *bbolt.Tx, now time.Time) (boltDecision, error) {
		next, write := decide(tx, s.readPace(tx, dest), now)
		if !write {
			return boltDecision{}, nil
		}
		v, err := json.Marshal(next)
		if err != nil {
			return boltDecision{}, err
		}
		return boltDecision{also: func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketPace)
			if err != nil {
				return err
			}
			return b.Put([]byte(dest), v)
		}}, nil
	})
	return err
}

// readPace is dest's pace in tx (empty: none yet, or one that cannot be
// read, said in the log).
func (s *Store) readPace(tx *bbolt.Tx, dest string) keystore.Pace {
	var p keystore.Pace
	b := tx.Bucket(bucketPace)
	if b == nil {
		return p
	}
	if v := b.Get([]byte(dest)); v != nil {
		if err := json.Unmarshal(v, &p); err != nil {
			s.log.Error("store: the resume pace of a destination could not be read; it starts anew", "path", s.path, "destination", dest, "err", err)
			return keystore.Pace{}
		}
	}
	return p
}
