package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// Parked keys by the start of their wait (keystore/wait.go). idx/waits
// holds every parked key with a wait start twice: once by that time
// across destinations, once within its destination, each entry's value
// its stage's code, so that a read of "waiting since before T" skips the
// other stages and namespaces without reading their records and stops at
// the first key that began to wait later. putEncoded and deleteRecord
// keep it in step with every write; a file from before it is indexed
// once at its first start (backfillWaits), which the meta entry
// waits-index records.
var bucketWaits = []byte("idx/waits") // 0, since ms, ns \x00 key -> stage code; 1, dest \x00, since ms, ns \x00 key -> stage code

// bkWaits is idx/waits's place in allBuckets.
const bkWaits = 14

// metaWaitsIndex is set once idx/waits holds every parked key of the file.
var metaWaitsIndex = []byte("waits-index")

// The two families of idx/waits.
const (
	waitsAll  = 0
	waitsDest = 1
)

// waitsPrefix is where the entries of dest ("": every destination) begin.
func waitsPrefix(dest string) []byte {
	if dest == "" {
		return []byte{waitsAll}
	}
	return append(append([]byte{waitsDest}, dest...), 0)
}

// waitsEntries are the entries of r (none when it does not wait).
func waitsEntries(r *keystore.Record, rk []byte) (keys [][]byte, stage []byte) {
	if r == nil || r.State != keystore.StateParked || r.WaitingSince() == nil {
		return nil, nil
	}
	at := append(u64(uint64(ms(*r.WaitingSince()))), rk...)
	keys = [][]byte{append(waitsPrefix(""), at...)}
	if r.Destination != "" {
		keys = append(keys, append(waitsPrefix(r.Destination), at...))
	}
	return keys, []byte{stageCodes[keystore.StageOf(r)]}
}

// indexWaits keeps idx/waits in step with a write of next over prev (nil:
// none).
func indexWaits(tx *bbolt.Tx, prev, next *keystore.Record, rk []byte) error {
	old, oldStage := waitsEntries(prev, rk)
	now, stage := waitsEntries(next, rk)
	if slices.EqualFunc(old, now, bytes.Equal) && bytes.Equal(oldStage, stage) {
		return nil
	}
	for _, k := range old {
		if err := del(tx, bkWaits, k); err != nil {
			return err
		}
	}
	for _, k := range now {
		if err := put(tx, bkWaits, k, stage); err != nil {
			return err
		}
	}
	return nil
}

// backfillWaits indexes every parked key of a file from an older version,
// once: the meta entry is written in the same transaction.
func backfillWaits(db *bbolt.DB) (int, error) {
	n := 0
	err := db.Update(func(tx *bbolt.Tx) error {
		err := eachRecord(tx, func(k []byte, r *keystore.Record) error {
			if r.State != keystore.StateParked {
				return nil
			}
			n++
			return indexWaits(tx, nil, r, k)
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaWaitsIndex, []byte{1})
	})
	return n, err
}

// eachRecord calls fn with every intact record of the file, for the
// indexes built once: a damaged one answers record_damaged and is
// indexed when repaired.
func eachRecord(tx *bbolt.Tx, fn func(k []byte, r *keystore.Record) error) error {
	return tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error {
		ns, key := splitRecordKey(k)
		r, err := decodeRecord(ns, key, v)
		if errs.CodeOf(err) == errs.RecordDamaged {
			return nil
		}
		if err != nil {
			return err
		}
		return fn(k, r)
	})
}

// ParkedByWait implements keystore.WaitReader.
func (s *Store) ParkedByWait(_ context.Context, q keystore.WaitQuery) ([]*keystore.Record, error) {
	q, err := q.Normalize()
	if err != nil {
		return nil, err
	}
	stages := make([]byte, 0, len(q.Stages))
	for _, st := range q.Stages {
		stages = append(stages, stageCodes[st])
	}
	var out []*keystore.Record
	err = s.db.Load().View(func(tx *bbolt.Tx) error {
		prefix := waitsPrefix(q.Destination)
		start := prefix
		if q.AfterNamespace != "" || q.AfterKey != "" {
			start = append(append(bytes.Clone(prefix), u64(uint64(ms(q.AfterSince)))...), recordKey(q.AfterNamespace, q.AfterKey)...)
		}
		until := uint64(ms(q.Until))
		keys := tx.Bucket(bucketKeys)
		c := tx.Bucket(bucketWaits).Cursor()
		k, v := c.Seek(start)
		if len(start) > len(prefix) && bytes.Equal(k, start) {
			k, v = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < q.Limit; k, v = c.Next() {
			at := k[len(prefix):]
			if len(at) < 8 {
				continue
			}
			if !q.Until.IsZero() && binary.BigEndian.Uint64(at[:8]) > until {
				break // every key after began to wait later
			}
			rk := at[8:]
			ns, key := splitRecordKey(rk)
			if (q.Namespace != "" && ns != q.Namespace) || slices.Contains(q.Except, ns) ||
				(len(stages) > 0 && (len(v) != 1 || !slices.Contains(stages, v[0]))) {
				continue // told by the entry alone: its record is not read
			}
			b := keys.Get(rk)
			if b == nil {
				continue
			}
			r, err := decodeRecord(ns, key, b)
			if errs.CodeOf(err) == errs.RecordDamaged {
				s.noteDamage(err) // skipped: the keys behind it are read
				continue
			}
			if err != nil {
				return err
			}
			if !q.Keeps(r) {
				continue // an entry a damaged record's repair left behind
			}
			out = append(out, r)
		}
		return nil
	})
	return out, s.readErr(err)
}

var _ keystore.WaitReader = (*Store)(nil)
