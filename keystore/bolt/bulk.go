package bolt

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// bucketBulk keeps what each bulk id names (keystore.BulkAction), from the
// first run of the decision that writes.
var bucketBulk = []byte("bulk") // id -> diskBulk

// bkBulk is bulk's place in allBuckets.
const bkBulk = 11

type diskBulk struct {
	Content []byte
	At      int64
	// the decision in the person's words (the audit's entry)
	By         string
	Note       string
	Resolution string
	Final      bool
	Rerun      bool
}

// The lengths of a bulk action's array: the first release's fields, then
// with the decision in words, then with re-runs.
const (
	bulkBase  = 2
	bulkWords = 6
	bulkRerun = 7
)

// fields are d's fields in their order on disk.
func (d *diskBulk) fields() []any {
	return []any{&d.Content, &d.At, &d.By, &d.Note, &d.Resolution, &d.Final, &d.Rerun}
}

func encodeBulk(a *keystore.BulkAction) ([]byte, error) {
	d := diskBulk{Content: a.Content, At: ms(a.At), By: a.By, Note: a.Note, Resolution: string(a.Resolution), Final: a.Final, Rerun: a.Rerun}
	return cbor.Marshal(d.fields()[:bulkRerun])
}

// decodeBulk reads either layout (fxamacker/cbor refuses an array of
// another length for a toarray struct, so the fields are read one by one).
func decodeBulk(id string, v []byte) (keystore.BulkAction, error) {
	var raw []cbor.RawMessage
	if err := decMode.Unmarshal(v, &raw); err != nil {
		return keystore.BulkAction{}, fmt.Errorf("bulk %s: %w", id, err)
	}
	var d diskBulk
	fields := d.fields()
	if len(raw) < bulkBase || len(raw) > len(fields) {
		return keystore.BulkAction{}, fmt.Errorf("bulk %s: %d fields, want %d to %d", id, len(raw), bulkBase, len(fields))
	}
	for i, r := range raw {
		if err := decMode.Unmarshal(r, fields[i]); err != nil {
			return keystore.BulkAction{}, fmt.Errorf("bulk %s, field %d: %w", id, i, err)
		}
	}
	return keystore.BulkAction{ID: id, Content: d.Content, At: fromMs(d.At), By: d.By, Note: d.Note,
		Resolution: keystore.State(d.Resolution), Final: d.Final, Rerun: d.Rerun}, nil
}

// ClaimBulk implements keystore.Driver, in a write of its own.
func (s *Store) ClaimBulk(_ context.Context, id string, decide func(prev *keystore.BulkAction, now time.Time) (*keystore.BulkAction, error)) error {
	var refused error
	err := s.change(func(tx *bbolt.Tx, now time.Time) error {
		var prev *keystore.BulkAction
		if v := tx.Bucket(bucketBulk).Get([]byte(id)); v != nil {
			a, err := decodeBulk(id, v)
			if err != nil {
				return err
			}
			prev = &a
		}
		next, err := decide(prev, now)
		if err != nil || next == nil {
			refused = err // the decision's answer, not a failed write
			return nil
		}
		v, err := encodeBulk(next)
		if err != nil {
			return err
		}
		return put(tx, bkBulk, []byte(next.ID), v)
	})
	if err != nil {
		return err
	}
	return refused
}

// BulkActions implements keystore.BulkResolver.
func (s *Store) BulkActions(_ context.Context, ids []string) (map[string]keystore.BulkAction, error) {
	out := map[string]keystore.BulkAction{}
	err := s.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketBulk)
		for _, id := range ids {
			v := b.Get([]byte(id))
			if v == nil {
				continue
			}
			a, err := decodeBulk(id, v)
			if err != nil {
				return err
			}
			out[id] = a
		}
		return nil
	})
	return out, s.readErr(err)
}

// Bulk decisions (keystore.Operations.ResolveMany) run over a selection by
// keystore.Filter through the indexes (Select) and batches of keys decided
// in one write transaction each (DecideKeys), every key written exactly
// as a single Resolve writes it: record, indexes, counts, history, event.

// walk is one index (or the key bucket) a selection reads: entries under
// prefix, whose record key starts skip bytes in.
type walk struct {
	bucket []byte
	prefix []byte
	skip   int
	nsPart []byte // the record key must begin with it (an index not ordered by namespace)
}

// walks plans a selection: the state index for failed and unknown keys,
// the lease index for reserved ones, otherwise the keys themselves (of
// the namespace, from the key prefix, when the filter names them). The
// indexes are ordered by state, then namespace and key, so a filter
// without a namespace walks every namespace through the same index. The
// holder, text, destination, reason and time range are matched on each
// candidate (Filter.Match).
func walks(f keystore.Filter) []walk {
	var nsPrefix []byte
	if f.Namespace != "" {
		nsPrefix = recordKey(f.Namespace, f.KeyPrefix)
	}
	indexed := len(f.States) > 0
	for _, st := range f.States {
		indexed = indexed && (stateIndexed(st) || st == keystore.StateReserved)
	}
	if !indexed {
		return []walk{{bucket: bucketKeys, prefix: nsPrefix}}
	}
	var out []walk
	// Failed before unknown: a key decided failed moves into the failed
	// index, behind a walk that already passed it.
	for _, st := range []keystore.State{keystore.StateFailed, keystore.StateUnknown, keystore.StateReserved} {
		switch {
		case !containsState(f.States, st):
		case st == keystore.StateReserved:
			out = append(out, walk{bucket: bucketLeases, skip: 8, nsPart: nsPrefix})
		default:
			out = append(out, walk{bucket: bucketState, skip: 1, prefix: stateIndexKey(st, nsPrefix)})
		}
	}
	return out
}

func containsState(states []keystore.State, s keystore.State) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// Select implements keystore.Selector. The cursor is the walk's number and
// the last bbolt key of the page.
func (s *Store) Select(_ context.Context, f keystore.Filter, cursor string, limit int) (keystore.Page, error) {
	f, err := f.Normalize()
	if err != nil {
		return keystore.Page{}, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	plan := walks(f)
	phase, after := 0, []byte(nil)
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(raw) < 2 || int(raw[0]) >= len(plan) {
			return keystore.Page{}, errs.InvalidField("cursor", "cursor", "cursor is not one this server returned")
		}
		phase, after = int(raw[0]), raw[1:]
		if !bytes.HasPrefix(after, plan[phase].prefix) {
			return keystore.Page{}, errs.InvalidField("cursor", "cursor", "cursor belongs to another selection")
		}
	}
	var page keystore.Page
	err = s.view(func(tx *bbolt.Tx) error {
		keys := tx.Bucket(bucketKeys)
		var last []byte
		lastPhase := 0
		for ; phase < len(plan); phase, after = phase+1, nil {
			w := plan[phase]
			c := tx.Bucket(w.bucket).Cursor()
			var k, v []byte
			if after != nil {
				if k, v = c.Seek(after); bytes.Equal(k, after) {
					k, v = c.Next()
				}
			} else {
				k, v = c.Seek(w.prefix)
			}
			for ; k != nil && bytes.HasPrefix(k, w.prefix); k, v = c.Next() {
				if len(k) < w.skip {
					continue
				}
				rk := k[w.skip:]
				if !bytes.HasPrefix(rk, w.nsPart) {
					continue
				}
				if w.skip > 0 {
					if v = keys.Get(rk); v == nil {
						continue // an index entry without its record: never shown
					}
				}
				ns, key := splitRecordKey(rk)
				r, err := decodeRecord(ns, key, v)
				if errs.CodeOf(err) == errs.RecordDamaged {
					s.noteDamage(err) // left out of selections; its key answers record_damaged
					continue
				}
				if err != nil {
					return err
				}
				if !f.Match(r) {
					continue
				}
				if len(page.Items) == limit {
					page.NextCursor = base64.RawURLEncoding.EncodeToString(append([]byte{byte(lastPhase)}, last...))
					return nil
				}
				page.Items = append(page.Items, r)
				last, lastPhase = append(last[:0], k...), phase
			}
		}
		return nil
	})
	return page, s.readErr(err)
}

// DecideKeys implements keystore.Driver: the batch is read and decided
// in one write transaction of its own, committed alone (a sweep's path),
// so live writes wait for one batch at most; a dry run reads in a read
// transaction and writes nothing.
func (s *Store) DecideKeys(_ context.Context, op keystore.KeysOp) error {
	decide := func(tx *bbolt.Tx, now time.Time) error {
		got := make([]keystore.Loaded, len(op.Keys))
		for i, ref := range op.Keys {
			got[i].KeyRef = ref
			cur, err := getRecord(tx, ref.Namespace, ref.Key)
			if errs.CodeOf(err) == errs.RecordDamaged {
				s.noteDamage(err)
				got[i].Damaged = true
				continue
			}
			if err != nil {
				return err
			}
			got[i].Record = cur
		}
		steps, err := op.Decide(got, now)
		if err != nil || op.DryRun {
			return err
		}
		for i, st := range steps {
			if st.Breaker != nil {
				return fmt.Errorf("%s %s/%s: a batch decision changes no breaker", op.Name, got[i].Namespace, got[i].Key)
			}
			if err := applyStep(tx, got[i].Record, nil, st); err != nil {
				return err
			}
		}
		return nil
	}
	if op.DryRun {
		return s.readErr(s.view(func(tx *bbolt.Tx) error { return decide(tx, s.now()) }))
	}
	return s.change(decide)
}
