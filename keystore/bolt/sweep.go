package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// Counts implements Store.
func (s *Store) Counts(context.Context) (map[string]map[keystore.State]int, error) {
	out := map[string]map[keystore.State]int{}
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketCounts).ForEach(func(k, v []byte) error {
			i := bytes.IndexByte(k, 0)
			if i < 0 || i+2 != len(k) || len(v) != 8 {
				return nil
			}
			ns := string(k[:i])
			if out[ns] == nil {
				out[ns] = map[keystore.State]int{}
			}
			out[ns][stateByCode[k[i+1]]] = int(binary.BigEndian.Uint64(v))
			return nil
		})
	})
	return out, s.readErr(err)
}

// Destinations implements Store: every breaker that has state, and every
// configured destination (closed until something happens to it).
func (s *Store) Destinations(context.Context) ([]keystore.Breaker, error) {
	now := s.now()
	var out []keystore.Breaker
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketBreakers).ForEach(func(k, v []byte) error {
			b, err := decodeBreaker(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, b.View(now))
			return nil
		})
	})
	if err != nil {
		return nil, s.readErr(err)
	}
	return s.policies.WithConfigured(out), nil
}

// Events implements Store.
func (s *Store) Events(_ context.Context, after uint64, limit int) ([]keystore.Event, error) {
	limit = keystore.EventLimit(limit)
	var out []keystore.Event
	err := s.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			ev, err := decodeEvent(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		return nil
	})
	return out, s.readErr(err)
}

// sweepTxBudget bounds how long one sweep transaction may run, so a sweep
// of a million records never holds up reserves for long: each transaction
// takes at most sweepBatch entries and stops early when its time is up.
const sweepTxBudget = 20 * time.Millisecond

// Sweep implements Store. It walks the time-ordered indexes from their
// oldest entry, so it touches only what is due.
func (s *Store) Sweep(ctx context.Context) (keystore.SweepStats, error) {
	var st keystore.SweepStats
	passes := []struct {
		bucket []byte
		do     func(tx *bbolt.Tx, k []byte, now time.Time) (bool, error)
		count  *int
	}{
		{bucketLeases, s.sweepLease, &st.LeasesExpired},
		{bucketExpires, s.sweepExpired, &st.Expired},
		{bucketEvents, s.sweepEvent, &st.Events},
	}
	if err := s.foldActivity(); err != nil {
		return st, s.readErr(err)
	}
	for _, p := range passes {
		for {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			n, more, took, err := s.sweepBatch(p.bucket, p.do)
			if err != nil {
				return st, s.readErr(err) // nothing of this batch was saved
			}
			*p.count += n
			s.observer().SweepPaused(took)
			st.LongestTx = max(st.LongestTx, took)
			if !more {
				break
			}
		}
	}
	return st, nil
}

// sweepBatch runs one short write transaction over the oldest entries of
// an index; the writer decides nothing else meanwhile. do returns false
// when the entry is not due yet: the rest are not either, since the index
// is ordered by time.
func (s *Store) sweepBatch(bucket []byte, do func(*bbolt.Tx, []byte, time.Time) (bool, error)) (n int, more bool, took time.Duration, err error) {
	err = s.change(func(tx *bbolt.Tx, now time.Time) error {
		start := time.Now()
		c := tx.Bucket(bucket).Cursor()
		var keys [][]byte
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			// At least one entry: a transaction that took none would end the
			// sweep (a slow moment of the machine is not the end of the index).
			if len(keys) == s.sweepMax || len(keys) > 0 && time.Since(start) > sweepTxBudget/2 {
				more = true
				break
			}
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			due, err := do(tx, k, now)
			if err != nil {
				return err
			}
			if !due {
				more = false
				break
			}
			n++
			if time.Since(start) > sweepTxBudget {
				more = true
				break
			}
		}
		took = time.Since(start)
		return nil
	})
	took = max(took, 0)
	return n, more && n > 0, took, err
}

func dueAt(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[:8])) }

// dueRecord reads the record a time-index entry points at, once the entry
// is due.
func dueRecord(tx *bbolt.Tx, k []byte, now time.Time) (cur *keystore.Record, due bool, err error) {
	if dueAt(k) > ms(now) {
		return nil, false, nil
	}
	ns, key := splitRecordKey(k[8:])
	cur, err = getRecord(tx, ns, key)
	return cur, err == nil, err
}

func (s *Store) sweepLease(tx *bbolt.Tx, k []byte, now time.Time) (bool, error) {
	cur, due, err := dueRecord(tx, k, now)
	if s.damaged(err) {
		return true, del(tx, bkLeases, k)
	}
	if !due {
		return false, err
	}
	var np keystore.NamespacePolicy
	if cur != nil {
		np = s.policies.Namespace(cur.Namespace)
	}
	st, expired := keystore.DecideLeaseExpiry(cur, np, now)
	if !expired {
		// reclaim namespaces: the next reserve takes the key over; a
		// stale entry (no longer reserved) is just dropped.
		return true, del(tx, bkLeases, k)
	}
	return true, applyStep(tx, cur, nil, st)
}

func (s *Store) sweepExpired(tx *bbolt.Tx, k []byte, now time.Time) (bool, error) {
	cur, due, err := dueRecord(tx, k, now)
	if s.damaged(err) {
		return true, del(tx, bkExpires, k)
	}
	if !due {
		return false, err
	}
	if cur == nil || cur.ExpiresAt == nil || !cur.Finished() || ms(*cur.ExpiresAt) != dueAt(k) {
		// A stale entry: drop it, never the record it points at.
		return true, del(tx, bkExpires, k)
	}
	return true, deleteRecord(tx, cur)
}

// damaged says whether err is a damaged record, noting it. The sweep
// drops its index entry and leaves the record as it is: nothing is
// decided on it, and the sweep goes on past it.
func (s *Store) damaged(err error) bool {
	if errs.CodeOf(err) != errs.RecordDamaged {
		return false
	}
	s.noteDamage(err)
	return true
}

func (s *Store) sweepEvent(tx *bbolt.Tx, k []byte, now time.Time) (bool, error) {
	ev, err := decodeEvent(binary.BigEndian.Uint64(k), tx.Bucket(bucketEvents).Get(k))
	if err != nil {
		return false, err
	}
	if now.Sub(ev.At) < keystore.EventRetention {
		return false, nil
	}
	return true, del(tx, bkEvents, k)
}
