package bolt

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// The write path of Store: group commit.
//
// One writer goroutine takes everything queued, decides and applies it in
// one bbolt write transaction and commits it; bbolt's commit writes the
// dirty pages, fdatasyncs, writes the meta page and fdatasyncs again. The
// callers of a group are answered only after that commit returned. The
// next commit starts as soon as the previous one returned, with everything
// queued meanwhile: the more callers wait, the more keys share one commit
// and its two fsyncs. The one file is the whole truth; nothing is answered
// from memory.
//
// A storage error stops writing. Callers whose commit failed are told the
// outcome is unknown (their change may be on disk: a failed fsync says
// nothing about what reached it); callers that come later are told the
// store is unavailable and nothing was recorded. Meanwhile the writer
// reopens the file, with backoff, and writes again once the reopened file
// passes the checks of a start and takes a commit (open.go).

// storeFault is why the store does not write.
type storeFault struct {
	err   error
	since time.Time
	// damaged: the whole-file check found damage (open.go). Writes stay
	// stopped until a person restores the file; nothing retries.
	damaged bool
}

// unavailable is the answer while writes are stopped. It names the kind of
// error (the errno's text: "no space left on device") but not the path.
func (f *storeFault) unavailable() error {
	if f.damaged {
		return errs.Errorf(errs.StoreUnavailable, "the store stopped writing at %s: the check of its file found damage; nothing was recorded (docs/runbooks.md, \"The store file is damaged\")",
			f.since.UTC().Format(time.RFC3339))
	}
	return errs.Errorf(errs.StoreUnavailable, "the store stopped writing after a storage error (%s) at %s and is retrying; nothing was recorded",
		errorKind(f.err), f.since.UTC().Format(time.RFC3339))
}

func errorKind(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, io.ErrShortWrite):
		return "short write"
	}
	return "disk error"
}

// Fault says why the store does not write, in words safe to show anyone
// (the log line at the error has the file and the whole error), or
// returns nil while it writes. /healthz shows it.
func (s *Store) Fault() error {
	if f := s.fault.Load(); f != nil {
		return f.unavailable()
	}
	return nil
}

// errNotRecorded answers a group whose transaction failed before its
// commit began: bbolt wrote nothing.
var errNotRecorded = errs.Errorf(errs.StoreUnavailable, "the store could not save the change; nothing was recorded")

// errOutcomeUnknown answers a group whose commit failed: its pages or its
// meta page may have reached the disk.
var errOutcomeUnknown = errs.Errorf(errs.StoreOutcomeUnknown,
	"the store failed while saving the change, which may or may not have been recorded; look the key up before retrying")

func (s *Store) writer() {
	defer close(s.done)
	group := make([]*writeOp, 0, s.maxBatch)
	var pace backoff.BackOff
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var carry *writeOp // a sweep met while a group filled: it commits next, alone
	for {
		op := carry
		carry = nil
		if op == nil {
			select {
			case o, ok := <-s.ops:
				if !ok {
					return
				}
				op = o
			case <-retry.C:
				if s.reopen() {
					pace = nil
				} else {
					retry.Reset(nextWait(pace))
				}
				continue
			}
		}
		// A sweep commits alone, so that its failure fails no one else.
		group, carry = s.commitGroup(append(group[:0], op), op.exec == nil)
		if f := s.fault.Load(); f != nil && !f.damaged && pace == nil {
			pace = s.opts.Retry()
			retry.Reset(nextWait(pace))
		}
	}
}

// nextWait is the next pause of b; a policy that gives up is held at a
// minute, since the store has nothing else to do than to try again.
func nextWait(b backoff.BackOff) time.Duration {
	if d := b.NextBackOff(); d != backoff.Stop {
		return d
	}
	return time.Minute
}

// commitGroup decides and applies ops in one write transaction and commits
// it. With gather it first takes in everything queued meanwhile (up to
// MaxBatch): writes that arrive while the group is decided still share its
// commit. It stops at a sweep, which it hands back. Only a failed write
// (not a failed decision) fails the group.
func (s *Store) commitGroup(ops []*writeOp, gather bool) (_ []*writeOp, carry *writeOp) {
	answer := func(err error) {
		for _, op := range ops {
			if err != nil {
				op.result, op.err = keystore.Result{}, err
			}
			close(op.done)
		}
	}
	if f := s.fault.Load(); f != nil {
		answer(f.unavailable())
		return ops, nil
	}
	tx, err := s.db.Load().Begin(true)
	if err != nil {
		s.stop(OpBegin, err)
		answer(errNotRecorded)
		return ops, nil
	}
	var note committed
	err = s.apply(tx, &note, func(yield func(*writeOp) bool) {
		for i := 0; i < len(ops); i++ {
			if !yield(ops[i]) {
				return
			}
			for gather && i == len(ops)-1 && len(ops) < s.maxBatch {
				select {
				case op, ok := <-s.ops:
					if !ok {
						gather = false
					} else if op.exec != nil {
						carry, gather = op, false
					} else {
						ops = append(ops, op)
					}
				default:
					gather = false
				}
			}
		}
	})
	if err != nil {
		// Nothing of the group reached the file. The rollback rebuilds
		// bbolt's free list by a walk of the file (NoFreelistSync), which
		// is slow on a large file but only ever happens here.
		_ = tx.Rollback()
		s.observer().StorageError(OpApply, err)
		s.log.Error("store write failed; nothing of it was recorded", "writes", len(ops), "err", err)
		answer(errNotRecorded)
		return ops, carry
	}
	began := time.Now()
	if err := s.commit(tx); err != nil {
		s.stop(OpCommit, err)
		answer(errOutcomeUnknown)
		return ops, carry
	}
	s.observer().Committed(len(ops), time.Since(began))
	answer(nil)
	note.notify(&s.commits) // after the answers: the workers read what the callers were told
	return ops, carry
}

// committed is what a group wrote, for the commit signal: most answers (a
// refused claim, a duplicate) write nothing, and no worker is woken by
// them.
type committed struct {
	changed bool
	unsaid  bool // a write that does not say its keys (a sweep, a bulk batch, events alone)
	keys    []keystore.CommittedKey
}

func (c *committed) notify(sig *keystore.CommitSignal) {
	switch {
	case !c.changed:
	case c.unsaid:
		sig.Notify()
	default:
		sig.Notify(c.keys...)
	}
}

// apply decides and applies each op of ops in tx; it stops at the first
// failed write, and notes in note what was written.
func (s *Store) apply(tx *bbolt.Tx, note *committed, ops iter.Seq[*writeOp]) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in write: %v", p)
		}
	}()
	now := s.now()
	for op := range ops {
		if op.exec != nil {
			if err := op.exec(tx, now); err != nil {
				return err
			}
			note.changed, note.unsaid = true, true
			continue
		}
		d, err := op.decide(tx, now)
		op.result, op.err = d.st.Result, err
		if err != nil {
			continue
		}
		if d.st.Record != nil || d.st.Breaker != nil || len(d.st.Events) > 0 {
			keys := d.st.Committed()
			note.changed, note.unsaid = true, note.unsaid || len(keys) == 0
			note.keys = append(note.keys, keys...)
		}
		if err := applyDecision(tx, d); err != nil {
			return err
		}
		if d.also != nil {
			if err := d.also(tx); err != nil {
				return err
			}
		}
	}
	return nil
}

// stopDamaged stops writes for good: the whole-file check found damage.
func (s *Store) stopDamaged(err error) {
	s.observer().BackgroundCheckFailed()
	f := &storeFault{err: err, since: time.Now(), damaged: true}
	for {
		old := s.fault.Load()
		if s.fault.CompareAndSwap(old, f) {
			break
		}
	}
	s.log.Error("store stopped writing: the check of the whole file after start found damage; answering store_unavailable until the file is restored", "path", s.path, "err", err)
}

// stop records a storage error: writes stop until reopen succeeds.
func (s *Store) stop(what string, err error) {
	s.observer().StorageError(what, err)
	f := &storeFault{err: fmt.Errorf("%s: %w", what, err), since: time.Now()}
	if s.fault.CompareAndSwap(nil, f) {
		s.log.Error("store stopped writing after a storage error; answering store_unavailable and retrying", "path", s.path, "err", f.err)
	}
}

// reopen closes the file and opens it again with every check of a start,
// then proves the disk takes a commit. It reports whether writes resume.
func (s *Store) reopen() bool {
	old := s.db.Load()
	if err := old.Close(); err != nil {
		s.log.Warn("store: closing the file after a storage error", "path", s.path, "err", err)
	}
	db, err := openChecked(s.path, s.opts, func(ns, key string) { s.noteDamage(keystore.RecordDamaged(ns, key)) })
	if err != nil {
		s.log.Warn("store: reopen failed; retrying", "path", s.path, "err", err)
		// Keep a handle that fails every read with "database not open",
		// which readErr answers as store_unavailable.
		return false
	}
	s.db.Store(db)
	tx, err := db.Begin(true)
	if err == nil {
		err = s.commit(tx)
	}
	if err != nil {
		s.log.Warn("store: the reopened file does not take a commit yet; retrying", "path", s.path, "err", err)
		return false
	}
	s.fault.Store(nil)
	s.log.Info("store writes again after a storage error", "path", s.path)
	return true
}
