package bolt

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
	bbolt "go.etcd.io/bbolt"
)

// A file from before idx/waits (the previous release's, or one a build
// before it opened) gets the index at its first start, once: the parked
// keys are listed by their wait as on a new file.
func TestAnOldFileGetsItsWaitIndexOnceAtItsFirstStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guard.db")
	c := storetest.NewClock()
	open := func(log *logbuf.Buffer) *Store {
		t.Helper()
		s, err := Open(path, Options{Clock: c.Now, Policies: storetest.StagePolicies, Logger: slog.New(slog.NewTextHandler(log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	listed := func(s *Store) []string {
		t.Helper()
		recs, err := s.ParkedByWait(context.Background(), keystore.WaitQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range recs {
			keys = append(keys, r.Namespace+"/"+r.Key+" "+string(keystore.StageOf(r)))
		}
		return keys
	}
	var logged logbuf.Buffer
	s := open(&logged)
	storetest.EveryStage(t, s, c.Advance)
	want := listed(s)
	if len(want) < 4 {
		t.Fatalf("every stage left %d parked keys: %v", len(want), want)
	}
	// Made old: the index and its mark gone.
	err := s.DB().Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketWaits); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(metaWaitsIndex)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const line = "built the index of the parked keys by the start of their wait"
	if strings.Contains(logged.String(), line) {
		t.Fatalf("a new file built the wait index:\n%s", logged.String())
	}
	for i, wantLine := range []int{1, 0} {
		var log logbuf.Buffer
		s = open(&log)
		if got := listed(s); !slices.Equal(got, want) {
			t.Fatalf("start %d listed %v, want %v", i+1, got, want)
		}
		s.Close()
		if n := strings.Count(log.String(), line); n != wantLine {
			t.Fatalf("start %d logged %d lines about the wait index, want %d:\n%s", i+1, n, wantLine, log.String())
		}
	}
}
