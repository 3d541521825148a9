package bolt

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// A disk that fails on demand, behind the one seam the store has: the
// commit of a write transaction. Each fault fails the way bbolt's commit
// fails on a real disk:
//
//   - no space left: a pwrite of the data pages fails; bbolt rolls back
//     and never writes the meta page, so nothing reached the file;
//   - short write: the same, with io.ErrShortWrite;
//   - fsync EIO: the fdatasync after the meta page fails, although the
//     page, and with it the whole commit, did reach the file.
type faultyDisk struct{ fault atomic.Pointer[string] }

func (d *faultyDisk) set(fault string) { d.fault.Store(&fault) }

func (d *faultyDisk) commit(tx *bbolt.Tx) error {
	f := d.fault.Load()
	if f == nil || *f == "" {
		return tx.Commit()
	}
	path := tx.DB().Path()
	switch *f {
	case "no space left":
		_ = tx.Rollback()
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	case "short write":
		_ = tx.Rollback()
		return io.ErrShortWrite
	case "fsync EIO":
		if err := tx.Commit(); err != nil {
			return err
		}
		return &os.PathError{Op: "fdatasync", Path: path, Err: syscall.EIO}
	}
	panic("unknown fault " + *f)
}

// quickRetry retries every 20 ms, so the tests need not wait.
func quickRetry() backoff.BackOff { return backoff.NewConstantBackOff(20 * time.Millisecond) }

type answer struct {
	key  string
	code errs.Code // "" for accepted
}

// reserveMany reserves n new keys from n goroutines at once.
func reserveMany(s *Store, prefix string, n int) []answer {
	out := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s_%d", prefix, i)
			r, err := s.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "crm", Key: key, Owner: "t"})
			out[i] = answer{key: key}
			switch {
			case err != nil:
				out[i].code = errs.CodeOf(err)
			case r.Outcome != keystore.OutcomeAccepted:
				out[i].code = errs.Code("outcome " + string(r.Outcome))
			}
		}()
	}
	wg.Wait()
	return out
}

// Each fault: the answers are honest against what is on disk after a
// restart (accepted: there; store_unavailable, "nothing was recorded": not
// there; store_outcome_unknown: either), the store is not ready while
// broken and says why, and it writes again without a restart once the
// disk works.
func TestStorageFaults(t *testing.T) {
	for _, tc := range []struct {
		fault       string
		onDiskAfter bool   // where the failed commit's keys are after a restart
		says        string // what Fault (and /healthz) says
	}{
		{"no space left", false, "no space left on device"},
		{"short write", false, "short write"},
		{"fsync EIO", true, "input/output error"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "n8n-guard.db")
			disk := &faultyDisk{}
			s, err := Open(path, Options{commit: disk.commit, Retry: quickRetry})
			if err != nil {
				t.Fatal(err)
			}
			answers := reserveMany(s, "before", 8)

			disk.set(tc.fault)
			failed := reserveMany(s, "failed", 16)
			unknown := 0
			for _, a := range failed {
				if a.code == errs.StoreOutcomeUnknown {
					unknown++
				}
			}
			if unknown == 0 {
				t.Fatalf("no answer said the outcome is unknown: %+v", failed)
			}
			if err := s.Ping(ctx); errs.CodeOf(err) != errs.StoreUnavailable {
				t.Fatalf("ping while the disk fails: %v (want store_unavailable: /readyz must be 503)", err)
			}
			if f := s.Fault(); f == nil || !strings.Contains(errs.MessageOf(f), tc.says) {
				t.Fatalf("Fault() = %v, want it to say %q (/healthz shows it)", f, tc.says)
			}
			// While broken: nothing recorded, said so.
			later := reserveMany(s, "while-broken", 4)
			for _, a := range later {
				if a.code != errs.StoreUnavailable {
					t.Fatalf("reserve while broken: %+v, want store_unavailable", a)
				}
			}
			answers = append(append(answers, failed...), later...)

			disk.set("")
			testwait.Value(t, testwait.Deadline, "the store to write again once the disk worked", func() (error, bool) { err := s.Ping(ctx); return err, err == nil })
			after := reserveMany(s, "after", 8)
			for _, a := range after {
				if a.code != "" {
					t.Fatalf("reserve after recovery: %+v", a)
				}
			}
			answers = append(answers, after...)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			checkOnDisk(t, path, answers, &tc.onDiskAfter)
		})
	}
}

// A real full disk: the store on a 512 KiB tmpfs. Needs root (mount);
// skips loudly otherwise.
func TestNoSpaceOnARealDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", dir).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIPPING the full-disk test: cannot mount a tmpfs (%v: %s); run as root", err, strings.TrimSpace(string(out)))
		fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
		t.Skip(msg)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	ctx := context.Background()
	path := filepath.Join(dir, "n8n-guard.db")
	// Room the test gives back later, to show recovery without a restart.
	spare := filepath.Join(dir, "spare")
	if err := os.WriteFile(spare, make([]byte, 128<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{Retry: quickRetry})
	if err != nil {
		t.Fatal(err)
	}
	var answers []answer
	full := false
	for round := 0; round < 400 && !full; round++ {
		for _, a := range reserveMany(s, fmt.Sprint("r", round), 16) {
			answers = append(answers, a)
			if a.code != "" {
				full = true
				if a.code != errs.StoreOutcomeUnknown && a.code != errs.StoreUnavailable {
					t.Fatalf("answer on a full disk: %+v", a)
				}
			}
		}
	}
	if !full {
		t.Fatal("the disk never filled: the test tested nothing")
	}
	if f := s.Fault(); f == nil || !strings.Contains(errs.MessageOf(f), "no space left on device") {
		t.Fatalf("Fault() = %v, want no space left on device", f)
	}
	if err := os.Remove(spare); err != nil {
		t.Fatal(err)
	}
	testwait.Value(t, testwait.Deadline, "the store to write again once the disk worked", func() (error, bool) { err := s.Ping(ctx); return err, err == nil })
	r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "after-room", Owner: "t"})
	if err != nil || r.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("reserve once there is room: %s %v", r.Outcome, err)
	}
	answers = append(answers, answer{key: "after-room"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkOnDisk(t, path, answers, nil)
	t.Logf("%d reserves on a 512 KiB disk until it was full", len(answers))
}

// checkOnDisk restarts the store at path and holds each answer against
// what is on disk: accepted must be there, store_unavailable ("nothing
// recorded") must not. With unknownOnDisk, store_outcome_unknown must be
// on disk exactly when *unknownOnDisk, and any other answer is an error;
// without it, those are not judged.
func checkOnDisk(t *testing.T, path string, answers []answer, unknownOnDisk *bool) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer s.Close()
	for _, a := range answers {
		r, err := s.Lookup(context.Background(), "crm", a.key)
		if err != nil {
			t.Fatal(err)
		}
		there := r.Record != nil
		switch {
		case a.code == "" && !there:
			t.Errorf("%s was answered accepted and is not on disk", a.key)
		case a.code == errs.StoreUnavailable && there:
			t.Errorf("%s was answered %q (nothing recorded) and is on disk", a.key, a.code)
		case unknownOnDisk == nil || a.code == "" || a.code == errs.StoreUnavailable:
		case a.code == errs.StoreOutcomeUnknown:
			if there != *unknownOnDisk {
				t.Errorf("%s (outcome unknown): on disk %v, want %v", a.key, there, *unknownOnDisk)
			}
		default:
			t.Errorf("%s: unexpected answer %s", a.key, a.code)
		}
	}
}
