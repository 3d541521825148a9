package bolt

import (
	"bytes"
	"context"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// Parked keys (keystore/park.go). A parked record never has a result, so
// its park fields travel in the record's result slot (diskPark), and the
// record layout stays what older files have. idx/parked holds the parked
// keys that wait to be resumed (not yet sent, not lost), per destination,
// oldest parked first: what ParkedCounts counts without reading records
// (the catch-up runner reads its queue from idx/waits, wait.go).
var bucketParked = []byte("idx/parked") // dest \x00 parked_at ms, ns \x00 key -> ""

// bkParked is idx/parked's place in allBuckets.
const bkParked = 10

// idx/woken holds the parked keys whose execution n8n woke and that were
// not reserved again (keystore.Woken), per destination: what WokenCounts
// counts without reading records. A file from before it is indexed once
// when the bucket is made (backfillWoken).
var bucketWoken = []byte("idx/woken") // dest \x00 ns \x00 key -> ""

// bkWoken is idx/woken's place in allBuckets.
const bkWoken = 12

type diskPark struct {
	_          struct{} `cbor:",toarray"`
	ParkedAt   int64
	ResumeURL  string
	SentAt     int64
	ClaimUntil int64
}

// diskParkSince is the park slot of an event that parked anew while it
// waited (keystore.Record.ParkedSince): diskPark with the first parking
// appended. Only such a key is written so (fxamacker/cbor decodes a
// toarray struct only from an array of its length), so every other
// parked key reads back in an older release as before.
type diskParkSince struct {
	_ struct{} `cbor:",toarray"`
	diskPark
	Since int64
}

// parkSinceLen is the length of diskParkSince's array.
const parkSinceLen = 5

// recordResult is what goes in a record's result slot.
func recordResult(r *keystore.Record) []byte {
	if r.State == keystore.StateUnknown && r.Check != nil {
		return checkSlot(r.Check) // reconcile.go
	}
	if r.State == keystore.StateReserved && r.ParkedSince != nil {
		// The attempt of a woken parked event: its wait goes on should it
		// park again. A reserved key has no result; an older release
		// reads this slot as one and never shows it.
		return mustCBOR(diskParkSince{Since: ms(*r.ParkedSince)})
	}
	if r.State != keystore.StateParked {
		return r.Result
	}
	d := diskPark{ParkedAt: msPtr(r.ParkedAt), ResumeURL: r.ResumeURL,
		SentAt: msPtr(r.ResumeSentAt), ClaimUntil: msPtr(r.ResumeClaimUntil)}
	var b []byte
	var err error
	if r.ParkedSince != nil && r.ParkedAt != nil && r.ParkedSince.Before(*r.ParkedAt) {
		b, err = cbor.Marshal(diskParkSince{diskPark: d, Since: ms(*r.ParkedSince)})
	} else {
		b, err = cbor.Marshal(d)
	}
	if err != nil {
		panic("cbor of a fixed struct: " + err.Error())
	}
	return b
}

func mustCBOR(v any) []byte {
	b, err := cbor.Marshal(v)
	if err != nil {
		panic("cbor of a fixed struct: " + err.Error())
	}
	return b
}

// decodePark reads the park fields of a parked record from its result slot.
func decodePark(r *keystore.Record, b []byte) error {
	var ds diskParkSince
	var err error
	if arrayLen(b) == parkSinceLen {
		err = decMode.Unmarshal(b, &ds)
	} else {
		err = decMode.Unmarshal(b, &ds.diskPark)
	}
	if err != nil {
		return fmt.Errorf("decode parked record %s/%s: %w", r.Namespace, r.Key, err)
	}
	d := ds.diskPark
	r.Result = nil
	r.ParkedAt, r.ResumeURL, r.ResumeSentAt, r.ResumeClaimUntil = fromMsPtr(d.ParkedAt), d.ResumeURL, fromMsPtr(d.SentAt), fromMsPtr(d.ClaimUntil)
	if ds.Since != 0 {
		since := fromMs(ds.Since)
		r.ParkedSince = &since
	}
	return nil
}

// resumable: the key waits in idx/parked for the catch-up runner (keys
// in the approval life cycle are the approval resumer's).
func resumable(r *keystore.Record) bool {
	p := keystore.PhaseOf(r)
	return (p == keystore.PhaseWaiting || p == keystore.PhaseClaimed) && r.ParkedAt != nil
}

func parkedIndexKey(r *keystore.Record, rk []byte) []byte {
	k := append([]byte(r.Destination), 0)
	k = append(k, u64(uint64(ms(*r.ParkedAt)))...)
	return append(k, rk...)
}

func wokenIndexKey(r *keystore.Record, rk []byte) []byte {
	return append(append([]byte(r.Destination), 0), rk...)
}

// indexParked keeps idx/parked and idx/woken in step with a write of next
// over prev.
func indexParked(tx *bbolt.Tx, prev, next *keystore.Record, rk []byte) error {
	if resumable(prev) {
		if err := del(tx, bkParked, parkedIndexKey(prev, rk)); err != nil {
			return err
		}
	}
	if keystore.Woken(prev) {
		if err := del(tx, bkWoken, wokenIndexKey(prev, rk)); err != nil {
			return err
		}
	}
	if keystore.Woken(next) {
		if err := put(tx, bkWoken, wokenIndexKey(next, rk), nil); err != nil {
			return err
		}
	}
	if resumable(next) {
		return put(tx, bkParked, parkedIndexKey(next, rk), nil)
	}
	return nil
}

// backfillWoken builds idx/woken of a file written by an older version,
// once, when its bucket was just made.
func backfillWoken(db *bbolt.DB) (int, error) {
	n := 0
	err := db.Update(func(tx *bbolt.Tx) error {
		return eachRecord(tx, func(k []byte, r *keystore.Record) error {
			if !keystore.Woken(r) {
				return nil
			}
			n++
			return put(tx, bkWoken, wokenIndexKey(r, k), nil)
		})
	})
	return n, err
}

// ParkedCounts implements keystore.ParkStore.
func (s *Store) ParkedCounts(context.Context) (map[string]int, error) {
	return s.countByDestination(bucketParked)
}

// WokenCounts implements keystore.ParkStore.
func (s *Store) WokenCounts(context.Context) (map[string]int, error) {
	return s.countByDestination(bucketWoken)
}

// countByDestination counts the entries of an index whose keys begin with
// the destination and a 0 byte (idx/parked, idx/woken).
func (s *Store) countByDestination(bucket []byte) (map[string]int, error) {
	out := map[string]int{}
	err := s.db.Load().View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if i := bytes.IndexByte(k, 0); i > 0 {
				out[string(k[:i])]++
			}
		}
		return nil
	})
	return out, s.readErr(err)
}

var _ keystore.ParkStore = (*Store)(nil)
