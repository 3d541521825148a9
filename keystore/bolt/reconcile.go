package bolt

import (
	"bytes"
	"context"
	"slices"

	"github.com/fxamacker/cbor/v2"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// Keys whose page waits for their check (keystore/check.go). An unknown
// record never has a result, so its hold travels in the record's result
// slot (diskCheck), marked so that nothing else stored there is taken for
// one, and the record layout stays what older files have. The keys held
// are found through idx/state, which lists every unknown key: no index of
// their own to keep.

const checkMark = "chk1"

type diskCheck struct {
	_          struct{} `cbor:",toarray"`
	Mark       string
	Check      string
	Since      int64
	ClaimUntil int64
	Claims     uint32
	ResumeURL  string
}

// checkSlot is what goes in an unknown record's result slot.
func checkSlot(h *keystore.CheckHold) []byte {
	b, err := cbor.Marshal(diskCheck{Mark: checkMark, Check: h.Check, Since: ms(h.Since), ClaimUntil: msPtr(h.ClaimUntil),
		Claims: uint32(h.Claims), ResumeURL: h.ResumeURL})
	if err != nil {
		panic("cbor of a fixed struct: " + err.Error())
	}
	return b
}

// decodeCheck reads the hold of an unknown record from its result slot;
// a slot without the mark is left as it is.
func decodeCheck(r *keystore.Record) {
	var d diskCheck
	if len(r.Result) == 0 || decMode.Unmarshal(r.Result, &d) != nil || d.Mark != checkMark {
		return
	}
	r.Result = nil
	r.Check = &keystore.CheckHold{Check: d.Check, Since: fromMs(d.Since), ClaimUntil: fromMsPtr(d.ClaimUntil),
		Claims: int(d.Claims), ResumeURL: d.ResumeURL}
}

// HeldForCheck implements keystore.CheckStore.
func (s *Store) HeldForCheck(_ context.Context, limit int) ([]*keystore.Record, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	var out []*keystore.Record
	err := s.db.Load().View(func(tx *bbolt.Tx) error {
		prefix := []byte{stateCodes[keystore.StateUnknown]}
		keys := tx.Bucket(bucketKeys)
		c := tx.Bucket(bucketState).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			rk := k[1:]
			v := keys.Get(rk)
			if v == nil {
				continue
			}
			ns, key := splitRecordKey(rk)
			r, err := decodeRecord(ns, key, v)
			if errs.CodeOf(err) == errs.RecordDamaged {
				s.noteDamage(err) // skipped: the keys behind it are checked
				continue
			}
			if err != nil {
				return err
			}
			if r.Check != nil {
				out = append(out, r)
			}
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b *keystore.Record) int { return a.Check.Since.Compare(b.Check.Since) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, s.readErr(err)
}

var _ keystore.CheckStore = (*Store)(nil)
