package bolt

import (
	"bytes"
	"context"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// The stage of a key (keystore/stage.go) is kept in its record and in
// idx/stage, which holds every key whose stage is not "", by stage,
// namespace and key: a queue (the re-run worker, the approval resumer)
// reads its stage's keys and nothing else. putEncoded and deleteRecord
// keep it in step with every write; a file from before it is indexed
// once at its first start (backfillStage), which the meta entry
// stage-index records.
var bucketStage = []byte("idx/stage") // stage code, ns \x00 key -> ""

// bkStage is idx/stage's place in allBuckets.
const bkStage = 13

// metaStageIndex is set once idx/stage holds every key of the file.
var metaStageIndex = []byte("stage-index")

// Stage codes on disk: never renumber.
var stageCodes = map[keystore.Stage]uint8{
	keystore.PhaseWaiting: 1, keystore.PhaseClaimed: 2, keystore.PhaseResumed: 3, keystore.PhaseLost: 4,
	keystore.PhaseAwaitingApproval: 5, keystore.PhaseApproved: 6, keystore.PhaseRejected: 7, // parked: 1-9
	keystore.StageAtGate: 10, keystore.StageGranted: 11, keystore.StageStarting: 12, keystore.StageStarted: 13, keystore.StageRefused: 14, // re-runs: 10-19
}

var stageByCode = func() map[uint8]keystore.Stage {
	m := make(map[uint8]keystore.Stage, len(stageCodes))
	for s, c := range stageCodes {
		m[c] = s
	}
	return m
}()

// diskRecordStage is a record with a stage: the array of
// diskRecordSummary with the stage's code appended. A record without a
// stage is written as before (diskRecord, or diskRecordSummary with a
// summary), so an older release reads it; a record of an older release
// reads back with the stage StageOf gives it.
type diskRecordStage struct {
	_ struct{} `cbor:",toarray"`
	diskRecord
	Summary string
	Stage   uint8
}

// The length of the array of a record with a stage.
const recordStageLen = recordSummaryLen + 1

func stageKey(st keystore.Stage, rk []byte) []byte {
	return append([]byte{stageCodes[st]}, rk...)
}

// indexStage keeps idx/stage in step with a write of next over prev (nil:
// none).
func indexStage(tx *bbolt.Tx, prev, next *keystore.Record, rk []byte) error {
	if prev != nil && next != nil && prev.Stage == next.Stage {
		return nil
	}
	if prev != nil && prev.Stage != "" {
		if err := del(tx, bkStage, stageKey(prev.Stage, rk)); err != nil {
			return err
		}
	}
	if next != nil && next.Stage != "" {
		return put(tx, bkStage, stageKey(next.Stage, rk), nil)
	}
	return nil
}

// backfillStage indexes the stage of every key of a file from an older
// version, once: the meta entry is written in the same transaction.
func backfillStage(db *bbolt.DB) (map[keystore.Stage]int, error) {
	n := map[keystore.Stage]int{}
	err := db.Update(func(tx *bbolt.Tx) error {
		err := tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error {
			ns, key := splitRecordKey(k)
			r, err := decodeRecord(ns, key, v)
			if errs.CodeOf(err) == errs.RecordDamaged {
				return nil // answers record_damaged; indexed when repaired
			}
			if err != nil || r.Stage == "" {
				return err
			}
			n[r.Stage]++
			return put(tx, bkStage, stageKey(r.Stage, k), nil)
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaStageIndex, []byte{1})
	})
	return n, err
}

// KeysAtStage implements keystore.StageReader.
func (s *Store) KeysAtStage(_ context.Context, q keystore.StageQuery) ([]*keystore.Record, error) {
	q, err := q.Normalize()
	if err != nil {
		return nil, err
	}
	var out []*keystore.Record
	err = s.db.Load().View(func(tx *bbolt.Tx) error {
		prefix := []byte{stageCodes[q.Stage]}
		if q.Namespace != "" {
			prefix = append(append(prefix, q.Namespace...), 0)
		}
		start := prefix
		if q.AfterNamespace != "" || q.AfterKey != "" {
			start = stageKey(q.Stage, recordKey(q.AfterNamespace, q.AfterKey))
			if bytes.Compare(start, prefix) < 0 {
				start = prefix
			}
		}
		keys := tx.Bucket(bucketKeys)
		c := tx.Bucket(bucketStage).Cursor()
		k, _ := c.Seek(start)
		if len(start) > len(prefix) && bytes.Equal(k, start) {
			k, _ = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < q.Limit; k, _ = c.Next() {
			rk := k[1:]
			v := keys.Get(rk)
			if v == nil {
				continue
			}
			ns, key := splitRecordKey(rk)
			r, err := decodeRecord(ns, key, v)
			if errs.CodeOf(err) == errs.RecordDamaged {
				s.noteDamage(err) // skipped: the keys behind it are read
				continue
			}
			if err != nil {
				return err
			}
			if r.Stage != q.Stage {
				continue // an entry a damaged record's repair left behind
			}
			out = append(out, r)
		}
		return nil
	})
	return out, s.readErr(err)
}

var _ keystore.StageReader = (*Store)(nil)
