package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// damageObserver counts what the store says about damage.
type damageObserver struct {
	noObserver
	damaged, checks int
}

func (o *damageObserver) RecordDamaged()         { o.damaged++ }
func (o *damageObserver) BackgroundCheckFailed() { o.checks++ }

// finishedKeys writes, at path, a completed key "done" (result_ref
// crm-contact-1), a key "failed" that failed for good (retryable false),
// and a few other completed keys; it returns the done record.
func finishedKeys(t *testing.T, path string) *keystore.Record {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	no := false
	for _, key := range []string{"done", "failed", "other_1", "other_2"} {
		r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Owner: "n8n exec 4711"})
		if err != nil || r.Outcome != keystore.OutcomeAccepted {
			t.Fatalf("reserve %s: %s %v", key, r.Outcome, err)
		}
		if key == "failed" {
			_, err = s.Fail(ctx, keystore.FailRequest{Namespace: "crm", Key: key, Token: r.Token, Reason: keystore.ReasonDestinationFailed, Retryable: &no})
		} else {
			_, err = s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm", Key: key, Token: r.Token, ResultRef: "crm-contact-1"})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Lookup(ctx, "crm", "done")
	if err != nil {
		t.Fatal(err)
	}
	return r.Record
}

// rawValue reads (or, with set, replaces) the stored value of crm/key
// behind the store's back, as a damaged disk would.
func rawValue(t *testing.T, path, key string, set func(v []byte) []byte) []byte {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []byte
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		v := bytes.Clone(b.Get(recordKey("crm", key)))
		if set != nil {
			v = set(v)
			if err := b.Put(recordKey("crm", key), v); err != nil {
				return err
			}
		}
		out = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// differing returns the offsets where the record's body changes when
// change is applied to it: the bytes a targeted flip rewrites.
func differing(t *testing.T, r *keystore.Record, change func(r *keystore.Record)) (offsets []int, to []byte) {
	t.Helper()
	a, err := encodeRecordBody(r)
	if err != nil {
		t.Fatal(err)
	}
	c := *r
	change(&c)
	b, err := encodeRecordBody(&c)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("the change alters the length (%d to %d): not a flip", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			offsets, to = append(offsets, sealLen+i), append(to, b[i])
		}
	}
	return offsets, to
}

// Bytes flipped inside a record's value (at random, or exactly the bytes
// that turn a completed key into failed and retryable, or that change its
// result_ref): the key answers record_damaged naming it on every route,
// nothing is written over it, it is never accepted again, one line and the
// Observer say so, the rest of the store goes on, and store check names it.
func TestDamagedRecord(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		key    string
		damage func(t *testing.T, r *keystore.Record, v []byte) []byte
	}{
		{"four random bytes", "done", func(t *testing.T, _ *keystore.Record, v []byte) []byte {
			for range 4 {
				i := rand.IntN(len(v))
				v[i] ^= byte(1 + rand.IntN(255))
			}
			return v
		}},
		{"state byte: completed to failed, retryable", "done", func(t *testing.T, r *keystore.Record, v []byte) []byte {
			offs, to := differing(t, r, func(r *keystore.Record) {
				r.State, r.Retryable = keystore.StateFailed, true
			})
			for i, o := range offs {
				v[o] = to[i]
			}
			return v
		}},
		{"retryable flag of a key failed for good", "failed", func(t *testing.T, _ *keystore.Record, v []byte) []byte {
			// false (0xf4) to true (0xf5): the only such byte past the
			// state is the flag.
			i := bytes.IndexByte(v[sealLen+2:], 0xf4)
			if i < 0 {
				t.Fatal("no false in the record")
			}
			v[sealLen+2+i] = 0xf5
			return v
		}},
		{"result reference", "done", func(t *testing.T, _ *keystore.Record, v []byte) []byte {
			i := bytes.Index(v, []byte("crm-contact-1"))
			if i < 0 {
				t.Fatal("no result_ref in the record")
			}
			v[i+len("crm-contact-1")-1] = '7'
			return v
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "n8n-guard.db")
			done := finishedKeys(t, path)
			damaged := rawValue(t, path, tc.key, func(v []byte) []byte { return tc.damage(t, done, v) })

			var logged logbuf.Buffer
			obs := &damageObserver{}
			s, err := Open(path, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil)), Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Checked(); err != nil {
				t.Fatalf("one damaged record stopped the whole store: %v", err)
			}
			name := "crm/" + tc.key
			isDamaged := func(what string, err error) {
				t.Helper()
				if errs.CodeOf(err) != errs.RecordDamaged || !strings.Contains(err.Error(), name) {
					t.Fatalf("%s: want record_damaged naming %s, got %v", what, name, err)
				}
			}
			for i := range 3 {
				r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: tc.key, Owner: fmt.Sprintf("copy %d", i)})
				if r.Outcome == keystore.OutcomeAccepted {
					t.Fatalf("the damaged key %s was accepted again", tc.key)
				}
				isDamaged("reserve", err)
			}
			_, err = s.Lookup(ctx, "crm", tc.key)
			isDamaged("lookup", err)
			_, err = s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm", Key: tc.key, Token: "t", ResultRef: "x"})
			isDamaged("complete", err)
			_, err = s.Fail(ctx, keystore.FailRequest{Namespace: "crm", Key: tc.key, Token: "t", Reason: keystore.ReasonDestinationFailed})
			isDamaged("fail", err)
			_, err = s.Resolve(ctx, keystore.ResolveRequest{Namespace: "crm", Key: tc.key, Resolution: keystore.StateFailed, By: "ops", Note: "checked the CRM", Force: true})
			isDamaged("resolve", err)
			page, err := s.List(ctx, keystore.ListQuery{Namespace: "crm"})
			if err != nil || len(page.Items) != 3 {
				t.Fatalf("listing next to a damaged record: %d items, %v", len(page.Items), err)
			}
			if r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "new"}); err != nil || r.Outcome != keystore.OutcomeAccepted {
				t.Fatalf("the rest of the store stopped: %s %v", r.Outcome, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if obs.damaged != 1 || strings.Count(logged.String(), "failed its checksum") != 1 || !strings.Contains(logged.String(), name) {
				t.Fatalf("want one Observer call and one log line naming %s; %d calls, log:\n%s", name, obs.damaged, logged.String())
			}
			if got := rawValue(t, path, tc.key, nil); !bytes.Equal(got, damaged) {
				t.Fatal("the damaged record was written over")
			}
			rep, err := Check(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || len(rep.Damaged) != 1 || rep.Damaged[0] != name {
				t.Fatalf("store check: damaged %v, problems %v", rep.Damaged, rep.Problems)
			}
		})
	}
}

// A store written before records had checksums (schema 1: bare CBOR) is
// sealed once at start, with one line giving the count; the second start
// does nothing, and every key reads back as it was.
func TestSchema1FileIsSealedOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	want := finishedKeys(t, path)
	// What the previous version left: every value its bare body, schema 1.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		var ks, vs [][]byte
		b.ForEach(func(k, v []byte) error {
			body, ok := openSeal(k, v)
			if !ok {
				t.Fatalf("%q is not sealed", k)
			}
			ks, vs = append(ks, bytes.Clone(k)), append(vs, bytes.Clone(body))
			return nil
		})
		for i := range ks {
			if err := b.Put(ks[i], vs[i]); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(1))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := Check(path, 0); err != nil || !rep.OK() {
		t.Fatalf("store check of a schema-1 file: %v %v", rep.Problems, err)
	}
	for i, wantLine := range []string{"records=4", ""} {
		var logged logbuf.Buffer
		s, err := Open(path, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		sealedLine := strings.Contains(logged.String(), "added a checksum to every record")
		if wantLine != "" && (!sealedLine || !strings.Contains(logged.String(), wantLine)) || wantLine == "" && sealedLine {
			t.Fatalf("start %d: log:\n%s", i+1, logged.String())
		}
		r, err := s.Lookup(ctx, "crm", "done")
		if err != nil || r.Record.State != keystore.StateCompleted || r.Record.ResultRef != want.ResultRef {
			t.Fatalf("start %d: done reads %+v %v", i+1, r.Record, err)
		}
		if r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "failed"}); err != nil || r.Outcome == keystore.OutcomeAccepted {
			t.Fatalf("start %d: a key failed for good: %s %v", i+1, r.Outcome, err)
		}
		if err := s.Checked(); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	rep, err := Check(path, 0)
	if err != nil || !rep.OK() || rep.Keys != 4 {
		t.Fatalf("store check after the upgrade: %d keys, %v %v", rep.Keys, rep.Problems, err)
	}
	var schema uint64
	db, _ = bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	db.View(func(tx *bbolt.Tx) error {
		schema = binary.BigEndian.Uint64(bucketValue(tx, bucketMeta, metaSchema))
		return nil
	})
	db.Close()
	if schema != schemaVersion {
		t.Fatalf("schema %d after the upgrade", schema)
	}
}
