package bolt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

func TestParseWAL(t *testing.T) {
	const gen = 42
	frame := func(seq uint64, payload string) []byte { return appendWALRecord(nil, gen, seq, []byte(payload)) }
	seqs := func(recs []walRecord) []uint64 {
		var out []uint64
		for _, r := range recs {
			out = append(out, r.seq)
		}
		return out
	}
	whole := slices.Concat(frame(7, "a"), frame(8, "bb"), frame(9, "ccc"))
	torn := bytes.Clone(whole)
	torn[len(torn)-1] ^= 0xff
	for _, tc := range []struct {
		name string
		log  []byte
		want []uint64
	}{
		{"zero-filled", make([]byte, 4096), nil},
		{"records then zeros", append(bytes.Clone(whole), make([]byte, 100)...), []uint64{7, 8, 9}},
		{"torn last record", torn, []uint64{7, 8}},
		{"cut short", whole[:len(whole)-2], []uint64{7, 8}},
		{"stale tail after a restart", slices.Concat(frame(20, "new"), frame(8, "old"), frame(9, "old")), []uint64{20}},
		{"length past the end", slices.Concat(frame(1, "x"), []byte{0x7f, 0xff, 0xff, 0xff}, make([]byte, 40)), []uint64{1}},
		{"another generation's records", slices.Concat(frame(1, "x"), appendWALRecord(nil, gen+1, 2, []byte("later run"))), []uint64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseWAL(tc.log, gen)
			if !slices.Equal(seqs(got), tc.want) {
				t.Fatalf("records %v, want %v", seqs(got), tc.want)
			}
			if len(got) > 0 && string(got[0].payload) != map[uint64]string{7: "a", 20: "new", 1: "x"}[got[0].seq] {
				t.Fatalf("payload %q", got[0].payload)
			}
		})
	}
}

// Restoring an older copy of the bbolt file beside the current log: the
// store opens, and applies none of the records written after the copy was
// taken (the copy holds another generation).
func TestRestoredBackupIgnoresNewerLog(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts Options
		n    int
	}{
		{"many commits since the copy", Options{CommitInterval: time.Millisecond}, 200},
		{"one open transaction since the copy", Options{CommitInterval: time.Hour}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "n8n-guard.db")
			open := func(o Options) *Store {
				s, err := Open(path, o)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s := open(Options{})
			if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "n", Key: "before", Owner: "t"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			backup, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s = open(tc.opts)
			for i := range tc.n {
				if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "n", Key: fmt.Sprint("after", i), Owner: "t"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, backup, 0o600); err != nil {
				t.Fatal(err)
			}
			s = open(Options{})
			defer s.Close()
			if r, _ := s.Lookup(ctx, "n", "before"); r.Record == nil {
				t.Fatal("the key of the backup is gone")
			}
			if r, _ := s.Lookup(ctx, "n", "after0"); r.Record != nil {
				t.Fatal("a key reserved after the backup came back from the log")
			}
		})
	}
}

// A sweep that fails (here: an event it cannot read) fails alone: the
// writes decided next to it are answered as usual.
func TestFailingSweepFailsNoOneElse(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "n8n-guard.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketEvents).Put(u64(1), []byte{0xff}) })
	if err != nil {
		t.Fatal(err)
	}
	stop, swept := make(chan struct{}), make(chan struct{})
	failed := 0
	go func() {
		defer close(swept)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Sweep(ctx); err != nil {
				failed++
			}
		}
	}()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "n", Key: fmt.Sprint("k", g, "_", i), Owner: "t"}); err != nil {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-swept
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d reserves failed next to a failing sweep", n)
	}
	if failed == 0 {
		t.Fatal("the sweep never failed: the test tested nothing")
	}
}
