package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// legacyFrame frames payload as the previous version's record seq of
// generation gen.
func legacyFrame(gen, seq uint64, payload []byte) []byte {
	dst := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[4:], legacySum(gen, dst[8:]))
	return dst
}

// legacyOp is one bucket change in the previous version's log.
func legacyOp(dst []byte, kind byte, bucket int, k, v []byte) []byte {
	dst = append(dst, kind, byte(bucket))
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

func TestParseLegacyLog(t *testing.T) {
	const gen = 42
	frame := func(seq uint64, payload string) []byte { return legacyFrame(gen, seq, []byte(payload)) }
	whole := slices.Concat(frame(7, "a"), frame(8, "bb"), frame(9, "ccc"))
	for _, tc := range []struct {
		name    string
		log     []byte
		after   uint64
		want    []uint64
		wantErr string
	}{
		{"zero-filled", make([]byte, 4096), 6, nil, ""},
		{"records then zeros", append(bytes.Clone(whole), make([]byte, 100)...), 6, []uint64{7, 8, 9}, ""},
		{"records already committed are another generation's", slices.Concat(legacyFrame(gen-1, 1, []byte("old")), frame(7, "a")), 6, nil, ""},
		{"a stale tail after the new records", slices.Concat(frame(7, "new"), legacyFrame(gen-1, 3, []byte("old"))), 6, []uint64{7}, ""},
		{"the next record damaged", func() []byte { b := bytes.Clone(whole); b[len(b)-1] ^= 0xff; return b }(), 6, nil, "record 9 at offset"},
		{"the next record cut short", whole[:len(whole)-2], 6, nil, "record 9 at offset"},
		{"a record missing", slices.Concat(frame(7, "a"), frame(9, "c")), 6, nil, "records are missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLegacyLog(tc.log, gen, tc.after)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error with %q, got %v (records %v)", tc.wantErr, err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint64
			for _, r := range got {
				seqs = append(seqs, r.seq)
			}
			if !slices.Equal(seqs, tc.want) {
				t.Fatalf("records %v, want %v", seqs, tc.want)
			}
		})
	}
}

// legacyStore leaves at path what the previous version left after a
// crash: a store file whose last commit is record 5 of generation gen,
// and a log with records 6 and 7, each reserving one key (records after
// the commit, never applied to the file).
func legacyStore(t *testing.T, path string, keys ...string) (logFile []byte) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const gen, applied = 77, 5
	now := time.Now().UTC().Truncate(time.Millisecond)
	np := keystore.Policies{}.Namespace("crm")
	err = s.db.Load().Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket(bucketLegacyLog)
		if err != nil {
			return err
		}
		if err := b.Put(legacyApplied, u64(applied)); err != nil {
			return err
		}
		return b.Put(legacyGen, u64(gen))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, key := range keys {
		st, err := keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "crm", Key: key, Owner: "old"}, nil, np, now)
		if err != nil {
			t.Fatal(err)
		}
		v, err := encodeRecord(st.Record)
		if err != nil {
			t.Fatal(err)
		}
		payload := legacyOp(nil, legacyPut, bkKeys, recordKey("crm", key), v)
		countKey := append([]byte("crm\x00"), stateCodes[keystore.StateReserved])
		payload = legacyOp(payload, legacyPut, bkCounts, countKey, u64(uint64(i+1)))
		logFile = append(logFile, legacyFrame(gen, applied+1+uint64(i), payload)...)
	}
	return append(logFile, make([]byte, 4096)...)
}

// The previous version's log is applied once at start and removed, with
// one line saying how many records it carried; what it cannot read with
// certainty stops the start.
func TestLegacyLog(t *testing.T) {
	ctx := context.Background()
	t.Run("applied once, then removed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "n8n-guard.db")
		log := legacyStore(t, path, "evt_6", "evt_7")
		if err := os.WriteFile(legacyLogPath(path), log, 0o600); err != nil {
			t.Fatal(err)
		}
		var logged bytes.Buffer
		s, err := Open(path, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"evt_6", "evt_7"} {
			if r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: k}); err != nil || r.Outcome != keystore.OutcomeInProgress {
				t.Fatalf("%s, answered before the upgrade, reserved again: %s %v", k, r.Outcome, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logged.String(), "applied and removed the previous version's log") || !strings.Contains(logged.String(), "records=2") {
			t.Fatalf("no line saying what the log carried:\n%s", logged.String())
		}
		if _, err := os.Stat(legacyLogPath(path)); !os.IsNotExist(err) {
			t.Fatalf("the log is still there: %v", err)
		}
		s, err = Open(path, Options{})
		if err != nil {
			t.Fatalf("second start after the upgrade: %v", err)
		}
		defer s.Close()
		if r, _ := s.Lookup(ctx, "crm", "evt_7"); r.Record == nil {
			t.Fatal("the key from the log is gone at the second start")
		}
	})
	for _, tc := range []struct {
		name  string
		log   func(log []byte) []byte // nil: no log file
		wants string
	}{
		{"a damaged record stops the start", func(log []byte) []byte { log[40] ^= 0xff; return log }, "damaged record"},
		{"a log cut inside a record stops the start", func(log []byte) []byte { return log[:len(log)-4096-3] }, "damaged record"},
		{"a missing log stops the start", nil, "is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "n8n-guard.db")
			log := legacyStore(t, path, "evt_6", "evt_7")
			if tc.log != nil {
				if err := os.WriteFile(legacyLogPath(path), tc.log(log), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(path, Options{})
			if err == nil {
				s.Close()
				t.Fatal("the store opened")
			}
			if !strings.Contains(err.Error(), tc.wants) || !strings.Contains(err.Error(), ".wal") {
				t.Fatalf("the refusal does not say what and where: %v", err)
			}
		})
	}
}
