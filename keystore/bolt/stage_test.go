package bolt

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
	bbolt "go.etcd.io/bbolt"
)

// A record with a stage is written in a layout of its own (the array one
// longer than a record with a summary), one without in the layout older
// versions read; each reads back with its stage, and a record of an older
// version reads back with the stage StageOf gives it.
func TestCodecWritesTheStageAndReadsOldLayouts(t *testing.T) {
	c := fakeclock.New()
	s, err := Open(filepath.Join(t.TempDir(), "guard.db"), Options{Clock: c.Now, Policies: storetest.StagePolicies})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := storetest.EveryStage(t, s, c.Advance)
	err = s.DB().View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error {
			ns, key := splitRecordKey(k)
			body, _ := openSeal(k, v)
			st := want[storetest.StagedKey{Namespace: ns, Key: key}]
			if n := arrayLen(body); (st != "") != (n == recordStageLen) {
				t.Errorf("%s/%s at stage %q is an array of %d", ns, key, st, n)
			}
			old := oldLayout(t, body)
			r, err := decodeRecordBody(ns, key, old)
			if err != nil || r.Stage != st {
				t.Errorf("%s/%s in the old layout reads back at stage %q (%v), want %q", ns, key, r.Stage, err, st)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// oldLayout is body, a record this version wrote, as the version before
// the stage wrote it.
func oldLayout(t *testing.T, body []byte) []byte {
	t.Helper()
	var d diskRecordStage
	if arrayLen(body) == recordStageLen {
		if err := decMode.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
	} else {
		r, err := decodeRecordBody("x", "y", body)
		if err != nil {
			t.Fatal(err)
		}
		if r.Stage != "" {
			t.Fatalf("a record at stage %s written without it", r.Stage)
		}
		return body
	}
	var out []byte
	var err error
	if d.Summary != "" {
		out, err = cbor.Marshal(diskRecordSummary{diskRecord: d.diskRecord, Summary: d.Summary})
	} else {
		out, err = cbor.Marshal(d.diskRecord)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A data folder of the version before the stage (records in the old
// layout, no idx/stage, no stage-index mark): its first start builds the
// index from the records, says so in one log line, and later starts do
// not build it again. Every key then reads back and is indexed at the
// stage the Decide paths that wrote it say.
func TestAnOldFileGetsItsStageIndexOnceAtItsFirstStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guard.db")
	c := fakeclock.New()
	open := func(log *logbuf.Buffer) *Store {
		t.Helper()
		s, err := Open(path, Options{Clock: c.Now, Policies: storetest.StagePolicies, Logger: slog.New(slog.NewTextHandler(log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var logged logbuf.Buffer
	s := open(&logged)
	want := storetest.EveryStage(t, s, c.Advance)
	// Made old: the records in the old layout, the index and its mark gone.
	err := s.DB().Update(func(tx *bbolt.Tx) error {
		keys := tx.Bucket(bucketKeys)
		var ks, vs [][]byte
		err := keys.ForEach(func(k, v []byte) error {
			body, ok := openSeal(k, v)
			if !ok {
				t.Fatalf("seal of %q", k)
			}
			ks, vs = append(ks, bytes.Clone(k)), append(vs, sealRecord(k, oldLayout(t, body)))
			return nil
		})
		if err != nil {
			return err
		}
		for i := range ks {
			if err := keys.Put(ks[i], vs[i]); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(bucketStage); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketStage); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaStageIndex)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const line = "built the index of the keys' stages"
	if strings.Contains(logged.String(), line) {
		t.Fatalf("a new file built the stage index:\n%s", logged.String())
	}
	var first logbuf.Buffer
	s = open(&first)
	storetest.WantStages(t, s, want)
	s.Close()
	if n := strings.Count(first.String(), line); n != 1 || !strings.Contains(first.String(), "at_gate=2") {
		t.Fatalf("the first start logged %d lines about the stage index, want one with the counts:\n%s", n, first.String())
	}
	var second logbuf.Buffer
	s = open(&second)
	defer s.Close()
	storetest.WantStages(t, s, want)
	if strings.Contains(second.String(), line) {
		t.Fatalf("the second start built the stage index again:\n%s", second.String())
	}
}

// A release from before the stage cannot read a record in the stage
// layout (it answers record_damaged for every parked key and re-run), nor
// keep idx/stage: had it written the file, a grant it wrote would stay
// out of the index the re-run worker reads, in silence. So a file this
// version opened carries a schema those releases refuse to start on
// ("newer than this n8n-guard knows"), new or upgraded.
func TestAFileWithStagesIsRefusedByAnOlderRelease(t *testing.T) {
	const before = 2 // the schema of the releases without the stage
	schemaOf := func(path string) uint64 {
		t.Helper()
		db, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v uint64
		_ = db.View(func(tx *bbolt.Tx) error {
			if b := bucketValue(tx, bucketMeta, metaSchema); len(b) == 8 {
				v = binary.BigEndian.Uint64(b)
			}
			return nil
		})
		return v
	}
	c := fakeclock.New()
	path := filepath.Join(t.TempDir(), "guard.db")
	s, err := Open(path, Options{Clock: c.Now, Policies: storetest.StagePolicies})
	if err != nil {
		t.Fatal(err)
	}
	want := storetest.EveryStage(t, s, c.Advance)
	// Made a file of the release before: its schema, no stage index.
	err = s.DB().Update(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(metaSchema, u64(before)); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaStageIndex)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{Clock: c.Now, Policies: storetest.StagePolicies})
	if err != nil {
		t.Fatal(err)
	}
	storetest.WantStages(t, s, want)
	s.Close()
	if v := schemaOf(path); v <= before {
		t.Fatalf("schema %d after this version opened the file: a release before the stage (schema %d) would start on it", v, before)
	}
	fresh := filepath.Join(t.TempDir(), "new.db")
	s, err = Open(fresh, Options{Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if v := schemaOf(fresh); v <= before {
		t.Fatalf("a new file has schema %d: a release before the stage (schema %d) would start on it", v, before)
	}
}
