package bolt

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// A backup restored in place (the store file replaced by an older copy,
// the marker beside it left as it was) is refused at start, naming both
// commits and the way out; with AcceptRestore the store starts, says so
// in the log with what was lost, and later starts need nothing.
func TestRestoredBackupIsNoticed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path, backup := filepath.Join(dir, "n8n-guard.db"), filepath.Join(dir, "backup.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	complete := func(key string) {
		t.Helper()
		r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: key})
		if err != nil || r.Outcome != keystore.OutcomeAccepted {
			t.Fatalf("reserve %s: %s %v", key, r.Outcome, err)
		}
		if _, err := s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm", Key: key, Token: r.Token, ResultRef: "crm-1"}); err != nil {
			t.Fatal(err)
		}
	}
	complete("before_backup")
	// The backup the way an operator takes it: from the running store.
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(ctx, func(_ int64, snap io.WriterTo) error { _, err := snap.WriteTo(f); return err }); err != nil {
		t.Fatal(err)
	}
	f.Close()
	complete("after_backup")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(backup, path); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{})
	if err == nil {
		s.Close()
		t.Fatal("a restored older store started without a word")
	}
	for _, want := range []string{"older than the one this data folder served", "--accept-restore", "docs/runbooks.md", path} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the refusal does not say %q: %v", want, err)
		}
	}

	var logged logbuf.Buffer
	s, err = Open(path, Options{AcceptRestore: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("with AcceptRestore: %v", err)
	}
	if !strings.Contains(logged.String(), "restored older store") || !strings.Contains(logged.String(), "commits_lost=") {
		t.Fatalf("the restore is not in the log:\n%s", logged.String())
	}
	if r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "before_backup"}); err != nil || r.Outcome == keystore.OutcomeAccepted {
		t.Fatalf("a key finished before the backup: %s %v", r.Outcome, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("the start after an accepted restore: %v", err)
	}
	s.Close()
}

// A store on another data folder's file (a move, not a restore of this
// one) starts with a warning: the commit counters of two stores say
// nothing about each other.
func TestAnotherStoresFileIsNotARestore(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a", "n8n-guard.db"), filepath.Join(dir, "b", "n8n-guard.db")
	for _, p := range []string{a, b} {
		s, err := Open(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			s.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "crm", Key: p + string(rune('a'+i))})
		}
		s.Close()
	}
	if err := os.Rename(a, b); err != nil { // a has fewer commits than b's marker says? either way: another store
		t.Fatal(err)
	}
	s, err := Open(b, Options{})
	if err != nil {
		t.Fatalf("another store's file: %v", err)
	}
	s.Close()
}

// Every commit reaches the disk before it is answered: bbolt must fsync
// (NoSync false) and grow the file with a sync (NoGrowSync false). A
// process crash keeps the page cache, so crash tests cannot see a missing
// fsync; this asserts the options, at open and at every commit.
func TestCommitsAreSynced(t *testing.T) {
	o := bboltOptions(Options{}, false)
	if o.NoSync || o.NoGrowSync {
		t.Fatalf("bbolt options: NoSync %v NoGrowSync %v", o.NoSync, o.NoGrowSync)
	}
	commits := 0
	opts := Options{}
	opts.commit = func(tx *bbolt.Tx) error {
		if db := tx.DB(); db.NoSync || db.NoGrowSync {
			t.Errorf("a commit with NoSync %v NoGrowSync %v", db.NoSync, db.NoGrowSync)
		}
		commits++
		return tx.Commit()
	}
	s, err := Open(filepath.Join(t.TempDir(), "n8n-guard.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "crm", Key: "evt_1"}); err != nil || r.Outcome != keystore.OutcomeAccepted {
		t.Fatal(r.Outcome, err)
	}
	s.Close()
	if commits == 0 {
		t.Fatal("no commit went through the seam: the test tested nothing")
	}
}

// The marker follows the commits while the store runs, not only at Close:
// after a crash (no Close) a restore of an older file is still noticed.
func TestMarkerFollowsCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 20 {
		if _, err := s.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "crm", Key: fmt.Sprint("evt_", i)}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := generation(s.DB())
	if err != nil {
		t.Fatal(err)
	}
	testwait.Value(t, testwait.Deadline, fmt.Sprintf("the marker to say commit %d, the file's", want), func() (uint64, bool) {
		_, got, err := readMarker(path)
		if err != nil {
			t.Fatal(err)
		}
		return got, got >= want
	})
}

// A file the previous version wrote (its free list not saved: bbolt's
// NoFreelistSync) is walked before bbolt opens it, opens, and from then on
// has its free list saved, so the next start reads it instead of walking.
func TestFileWithoutSavedFreeList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	finishedKeys(t, path)
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("x"), []byte("y")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	saved := func() bool {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m0, _ := readMeta(f, 0)
		m1, _ := readMeta(f, 4096)
		m := m0
		if m1.txid > m0.txid {
			m = m1
		}
		return m.freelist != noFreelist
	}
	if saved() {
		t.Fatal("the previous version's file has a saved free list: the test tests nothing")
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "crm", Key: "done"}); err != nil || r.Outcome != keystore.OutcomeDuplicate {
		t.Fatalf("a completed key: %s %v", r.Outcome, err)
	}
	s.Close()
	if !saved() {
		t.Fatal("the free list is still not saved")
	}
}
