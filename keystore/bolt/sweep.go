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
			if ev, ok := s.readEvent(k, v); ok {
				out = append(out, ev)
			}
		}
		return nil
	})
	return out, s.readErr(err)
}

// sweepTxBudget bounds how long one sweep transaction may run, so a sweep
// of a million records never holds up reserves for long: each transaction
// takes at most sweepMax entries and stops early when its time is up.
const sweepTxBudget = 20 * time.Millisecond

// FoldActivity implements keystore.Driver.
func (s *Store) FoldActivity(context.Context) error { return s.readErr(s.foldActivity()) }

// SweepDue implements keystore.Driver: one short write transaction over
// the oldest entries of the pass's time-ordered index (idx/leases,
// idx/expires, the events); the writer decides nothing else meanwhile.
// An entry that is not due yet ends the pass: the rest are not either.
// An entry the pass went past (decided, stale, or its record damaged) is
// dropped from the index; one whose key the decision leaves as it is (a
// reclaim namespace's lease) stays, for the listings and selections of
// reserved keys read this index, and the next batch starts after the
// cursor.
func (s *Store) SweepDue(_ context.Context, op keystore.SweepOp) (b keystore.SweepBatch, err error) {
	bucket, do := bucketEvents, s.sweepEvent
	switch op.Pass {
	case keystore.SweepLeases:
		bucket, do = bucketLeases, s.sweepLease
	case keystore.SweepRetention:
		bucket, do = bucketExpires, s.sweepExpired
	}
	var read int
	err = s.change(func(tx *bbolt.Tx, now time.Time) error {
		b, read = keystore.SweepBatch{}, 0
		start := time.Now()
		c := tx.Bucket(bucket).Cursor()
		k, _ := c.First()
		if after := []byte(op.Cursor); len(after) > 0 {
			if k, _ = c.Seek(after); bytes.Equal(k, after) {
				k, _ = c.Next()
			}
		}
		var keys [][]byte
		for ; k != nil; k, _ = c.Next() {
			// At least one entry: a transaction that took none would end the
			// sweep (a slow moment of the machine is not the end of the index).
			if len(keys) == s.sweepMax || len(keys) > 0 && time.Since(start) > sweepTxBudget/2 {
				b.More = true
				break
			}
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			due, changed, err := do(tx, op, k, now)
			if err != nil {
				return err
			}
			if !due {
				b.More = false
				break
			}
			read++
			b.Cursor = string(k)
			if changed {
				b.Changed++
			}
			if time.Since(start) > sweepTxBudget {
				b.More = true
				break
			}
		}
		b.Took = time.Since(start)
		return nil
	})
	b.Took = max(b.Took, 0)
	if err != nil {
		return keystore.SweepBatch{Took: b.Took}, s.readErr(err) // nothing of this batch was saved
	}
	s.observer().SweepPaused(b.Took)
	b.More = b.More && read > 0
	return b, nil
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

// sweepLease decides a due lease entry's record. An entry whose record is
// no longer reserved with this lease (stale) is dropped; one whose key the
// decision leaves (a reclaim namespace: the next reserve takes it over)
// stays, since the key is still reserved with this lease.
func (s *Store) sweepLease(tx *bbolt.Tx, op keystore.SweepOp, k []byte, now time.Time) (due, changed bool, err error) {
	cur, due, err := dueRecord(tx, k, now)
	if s.damaged(err) {
		return true, false, del(tx, bkLeases, k)
	}
	if !due {
		return false, false, err
	}
	if cur == nil || cur.State != keystore.StateReserved || msPtr(cur.LeaseExpiresAt) != dueAt(k) {
		return true, false, del(tx, bkLeases, k)
	}
	st, _ := op.Decide(cur, now)
	if st.Record == nil && len(st.Events) == 0 {
		return true, false, nil
	}
	return true, true, applyStep(tx, cur, nil, st)
}

// sweepExpired deletes a due expiry entry's record when the decision says
// so; a stale entry (the record has another expiry, or none) is dropped,
// never the record it points at.
func (s *Store) sweepExpired(tx *bbolt.Tx, op keystore.SweepOp, k []byte, now time.Time) (due, changed bool, err error) {
	cur, due, err := dueRecord(tx, k, now)
	if s.damaged(err) {
		return true, false, del(tx, bkExpires, k)
	}
	if !due {
		return false, false, err
	}
	if cur == nil || cur.ExpiresAt == nil || ms(*cur.ExpiresAt) != dueAt(k) {
		return true, false, del(tx, bkExpires, k)
	}
	if _, gone := op.Decide(cur, now); !gone {
		return true, false, del(tx, bkExpires, k)
	}
	return true, true, deleteRecord(tx, cur)
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

// sweepEvent removes the event at k once it is older than the retention;
// a damaged one goes with the events after it (eventAt).
func (s *Store) sweepEvent(tx *bbolt.Tx, op keystore.SweepOp, k []byte, now time.Time) (due, changed bool, err error) {
	at, ok := s.eventAt(tx, k)
	if !ok || now.Sub(at) < op.Retention {
		return false, false, nil
	}
	return true, true, del(tx, bkEvents, k)
}
