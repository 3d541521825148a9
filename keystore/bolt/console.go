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

// What the operator console reads without walking every key: who held a
// key (search by owner), the unknown keys in the order they went unknown
// (the queue a person works through) and the hourly activity (the chart).
// They are written in the same transaction as the record they describe.
var (
	bucketOwners   = []byte("idx/owner")   // owner \x00 ns \x00 key -> "" (failed and unknown, with an owner)
	bucketWaiting  = []byte("idx/waiting") // updated_at ms, ns \x00 key -> "" (unknown only)
	bucketActivity = []byte("activity")    // hour (unix s), kind -> uint64
)

// Bucket codes of the console's buckets: their place in allBuckets.
const (
	bkOwners   = 7
	bkWaiting  = 8
	bkActivity = 9
)

func ownerIndexKey(owner string, rk []byte) []byte {
	return append(append([]byte(owner), 0), rk...)
}

// ownerIndexed: idx/owner covers the failed and unknown keys, the ones a
// person acts on, like idx/state: a key that is reserved and then
// completed, the path of nearly every key, writes no entry (one would cost
// each reserve and complete a write, and completed keys a third more
// file). Reserved keys are found by owner on the lease index.
func ownerIndexed(r *keystore.Record) bool {
	return r != nil && r.Owner != "" && stateIndexed(r.State)
}

// indexForConsole keeps idx/owner, idx/waiting and the activity counts in
// step with a write of next over prev (nil: a new key).
func indexForConsole(tx *bbolt.Tx, prev, next *keystore.Record, rk []byte) error {
	was, is := ownerIndexed(prev), ownerIndexed(next)
	moved := was && is && prev.Owner != next.Owner
	if was && (!is || moved) {
		if err := del(tx, bkOwners, ownerIndexKey(prev.Owner, rk)); err != nil {
			return err
		}
	}
	if is && (!was || moved) {
		if err := put(tx, bkOwners, ownerIndexKey(next.Owner, rk), nil); err != nil {
			return err
		}
	}
	if prev != nil && prev.State == keystore.StateUnknown {
		if err := del(tx, bkWaiting, timeIndexKey(ms(prev.UpdatedAt), rk)); err != nil {
			return err
		}
	}
	if next.State == keystore.StateUnknown {
		if err := put(tx, bkWaiting, timeIndexKey(ms(next.UpdatedAt), rk), nil); err != nil {
			return err
		}
	}
	if kind := keystore.ActivityOf(prev, next); kind != keystore.ActivityNone {
		return addActivity(tx, next.UpdatedAt, kind, 1)
	}
	return nil
}

// unindexForConsole removes a deleted record's entries.
func unindexForConsole(tx *bbolt.Tx, r *keystore.Record, rk []byte) error {
	if ownerIndexed(r) {
		if err := del(tx, bkOwners, ownerIndexKey(r.Owner, rk)); err != nil {
			return err
		}
	}
	if r.State == keystore.StateUnknown {
		return del(tx, bkWaiting, timeIndexKey(ms(r.UpdatedAt), rk))
	}
	return nil
}

func activityKey(hour time.Time, kind keystore.ActivityKind) []byte {
	return append(u64(uint64(hour.Unix())), byte(kind))
}

func addActivity(tx *bbolt.Tx, at time.Time, kind keystore.ActivityKind, n int) error {
	k := activityKey(at.UTC().Truncate(time.Hour), kind)
	var have uint64
	if v := tx.Bucket(bucketActivity).Get(k); len(v) == 8 {
		have = binary.BigEndian.Uint64(v)
	}
	return put(tx, bkActivity, k, u64(have+uint64(n)))
}

// foldActivity writes the duplicate counts kept in memory and drops hours
// older than keystore.ActivityHours.
func (s *Store) foldActivity() error {
	dups := s.dups.Take()
	cutoff := s.now().Truncate(time.Hour).Add(-keystore.ActivityHours * time.Hour)
	err := s.change(func(tx *bbolt.Tx, _ time.Time) error {
		for h, n := range dups {
			if err := addActivity(tx, time.Unix(h, 0), keystore.ActivityDuplicate, n); err != nil {
				return err
			}
		}
		c := tx.Bucket(bucketActivity).Cursor()
		var old [][]byte
		for k, _ := c.First(); k != nil && bytes.Compare(k, u64(uint64(cutoff.Unix()))) < 0; k, _ = c.Next() {
			old = append(old, append([]byte(nil), k...))
		}
		for _, k := range old {
			if err := del(tx, bkActivity, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for h, n := range dups { // not written: keep them for the next try
			s.dups.Add(time.Unix(h, 0), n)
		}
	}
	return err
}

// Activity implements Store.
func (s *Store) Activity(_ context.Context, since time.Time) ([]keystore.HourActivity, error) {
	since = since.UTC().Truncate(time.Hour)
	var out []keystore.HourActivity
	err := s.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketActivity).Cursor()
		for k, v := c.Seek(u64(uint64(since.Unix()))); k != nil; k, v = c.Next() {
			if len(k) != 9 || len(v) != 8 {
				continue
			}
			hour := time.Unix(int64(binary.BigEndian.Uint64(k[:8])), 0).UTC()
			if len(out) == 0 || !out[len(out)-1].Hour.Equal(hour) {
				out = append(out, keystore.HourActivity{Hour: hour})
			}
			out[len(out)-1].Add(keystore.ActivityKind(k[8]), int(binary.BigEndian.Uint64(v)))
		}
		return nil
	})
	if err != nil {
		return nil, s.readErr(err)
	}
	return s.dups.AddTo(out, since, s.now()), nil
}

// backfillConsole builds the console's indexes of a file written by an
// older version, once, when their buckets were just created.
func backfillConsole(db *bbolt.DB) (int, error) {
	n := 0
	err := db.Update(func(tx *bbolt.Tx) error {
		owners, waiting := tx.Bucket(bucketOwners), tx.Bucket(bucketWaiting)
		return tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error {
			ns, key := splitRecordKey(k)
			r, err := decodeRecord(ns, key, v)
			if errs.CodeOf(err) == errs.RecordDamaged {
				return nil // answers record_damaged; indexed when repaired
			}
			if err != nil {
				return err
			}
			n++
			if ownerIndexed(r) {
				if err := owners.Put(ownerIndexKey(r.Owner, k), nil); err != nil {
					return err
				}
			}
			if r.State == keystore.StateUnknown {
				return waiting.Put(timeIndexKey(ms(r.UpdatedAt), k), nil)
			}
			return nil
		})
	})
	return n, err
}
