package bolt

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Buckets of the keystore in the bbolt file. Other packages (notify) keep
// their own buckets in the same file under their own prefix.
var (
	bucketKeys     = []byte("keys")        // ns \x00 key -> record
	bucketState    = []byte("idx/state")   // state code, ns \x00 key -> "" (open states only)
	bucketLeases   = []byte("idx/leases")  // lease end ms, ns \x00 key -> "" (reserved only)
	bucketExpires  = []byte("idx/expires") // expires_at ms, ns \x00 key -> "" (finished only)
	bucketCounts   = []byte("counts")      // ns \x00 state code -> uint64
	bucketBreakers = []byte("breakers")    // destination -> breaker
	bucketEvents   = []byte("events")      // seq -> event
	allBuckets     = [][]byte{bucketKeys, bucketState, bucketLeases, bucketExpires, bucketCounts, bucketBreakers, bucketEvents,
		bucketOwners, bucketWaiting, bucketActivity, bucketParked, bucketBulk, bucketWoken, bucketStage, bucketWaits} // their index is the code in bk* (console.go, park.go, bulk.go, stage.go, wait.go)
)

// Bucket codes: indexes into allBuckets. The previous version's log
// (legacy.go) names buckets by them: never renumber.
const (
	bkKeys     = 0
	bkState    = 1
	bkLeases   = 2
	bkExpires  = 3
	bkCounts   = 4
	bkBreakers = 5
	bkEvents   = 6
)

// bucketFor opens a keystore bucket by its code. The time indexes fill
// their pages completely: new entries land at or near their end, and
// bbolt's default of half-full pages would double them on disk.
func bucketFor(tx *bbolt.Tx, code int) *bbolt.Bucket {
	b := tx.Bucket(allBuckets[code])
	if code == bkLeases || code == bkExpires {
		b.FillPercent = 0.95
	}
	return b
}

func put(tx *bbolt.Tx, bucket int, k, v []byte) error { return bucketFor(tx, bucket).Put(k, v) }

func del(tx *bbolt.Tx, bucket int, k []byte) error { return bucketFor(tx, bucket).Delete(k) }

func nextSequence(tx *bbolt.Tx, bucket int) (uint64, error) {
	return bucketFor(tx, bucket).NextSequence()
}

// Options configure Open.
type Options struct {
	Policies    keystore.Policies
	Clock       keystore.Clock
	Logger      *slog.Logger
	LockTimeout time.Duration // how long to wait for another process's file lock (default 2s)
	// MaxBatch bounds how many writes share one commit (default 2048).
	MaxBatch int
	// SweepBatch bounds the deletes of one sweep transaction (default 1000).
	SweepBatch int
	// Retry paces the reopening of the file after a storage error
	// (default: exponential from 100 ms up to 10 s, without end).
	Retry func() backoff.BackOff
	// Observer is told of commits, storage errors and sweep pauses
	// (observer.go); nil: nobody is.
	Observer Observer
	// AcceptRestore lets the store start on a file older than the last
	// one its data folder served (a backup restored in place), logging
	// the restore (generation.go). Without it such a start is refused.
	AcceptRestore bool

	// commit commits a write transaction: (*bbolt.Tx).Commit. The fault
	// tests put a disk that fails in its place.
	commit func(*bbolt.Tx) error
}

// Store is the embedded keystore.Store: one bbolt file, every write
// committed before it is answered.
//
// Writes go through one writer goroutine that commits everything queued
// while the previous commit ran, in one bbolt transaction (group commit,
// writer.go). bbolt's own Batch waits a fixed delay for a batch to
// fill, which caps throughput at concurrency/delay; group commit does not
// wait for anything. Reads run in bbolt read transactions beside it.
type Store struct {
	keystore.Operations // Reserve, Complete, …: decided over DecideKey, DecideBreaker

	path     string
	opts     Options
	db       atomic.Pointer[bbolt.DB] // replaced when the writer reopens the file
	policies keystore.Policies
	clock    keystore.Clock
	log      *slog.Logger
	maxBatch int
	sweepMax int

	mu     sync.RWMutex // guards closed and sends on ops
	closed bool
	ops    chan *writeOp
	done   chan struct{}

	fault  atomic.Pointer[storeFault] // set while a storage error stops writes
	commit func(*bbolt.Tx) error
	obs    Observer                // nil: nobody listens (observer.go)
	dups   keystore.DuplicateTally // duplicate answers not yet counted in the file
	damage sync.Map                // messages of the damaged records already logged
	told   sync.WaitGroup          // events about damaged records being written (Close waits)

	id       string        // the store's identity (bucket meta, and the marker)
	savedGen atomic.Uint64 // the generation last written into the marker
	stopGen  chan struct{} // closed by Close: keepGeneration and the check end
	genDone  chan struct{}
	checked  chan struct{} // closed when the whole-file check after start ended
	checkErr error         // what it found; read after checked is closed

	paceWake keystore.Wake // told when this process frees a slot or ends a call (pace.go)

	commits keystore.CommitSignal // told after each commit that changed something (writer.go)
}

// Commits implements keystore.CommitFeed.
func (s *Store) Commits() (<-chan struct{}, func()) { return s.commits.Subscribe() }

// CommittedKeys implements keystore.KeyedCommitFeed.
func (s *Store) CommittedKeys(match func(keystore.CommittedKey) bool) *keystore.KeyedCommits {
	return s.commits.SubscribeKeys(match)
}

// view runs fn in a read transaction of the current file. A page too
// damaged for bbolt to read makes it panic; that fails this read (and
// stops writes: the whole file is suspect), never the process.
func (s *Store) view(fn func(tx *bbolt.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store %s: the file is damaged (bbolt: %v)", s.path, p)
			s.stopDamaged(err)
			err = s.fault.Load().unavailable()
		}
	}()
	return s.db.Load().View(fn)
}

// Checked returns the outcome of the whole-file check that runs after
// Open, waiting for it: nil, or the damage that stopped writes.
func (s *Store) Checked() error {
	<-s.checked
	return s.checkErr
}

// checkInBackground runs the whole-file check (open.go) on the file opened
// at start; damage stops writes for good.
func (s *Store) checkInBackground() {
	defer close(s.checked)
	began := time.Now()
	err := checkWhole(s.db.Load(), s.path, s.stopGen, func(ns, key string) { s.noteDamage(keystore.RecordDamaged(ns, key)) })
	if errors.Is(err, errCheckStopped) || errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return // closing, or reopened after a storage error (and checked then)
	}
	if err != nil {
		s.checkErr = err
		s.stopDamaged(err)
		return
	}
	s.log.Info("store: the whole-file check after start found no damage", "path", s.path, "took", time.Since(began).Round(time.Millisecond))
}

// noteDamage says once per record, in the log and to the Observer, that
// err is a damaged record (errs.RecordDamaged); other errors pass.
func (s *Store) noteDamage(err error) {
	if errs.CodeOf(err) != errs.RecordDamaged {
		return
	}
	msg := errs.MessageOf(err)
	if !s.firstDamage(msg) {
		return
	}
	s.log.Error("store: a record failed its checksum; its key answers record_damaged until it is restored or repaired by hand; every listing and the catch-up skip it", "path", s.path, "err", msg)
	if ns, key, ok := keystore.DamagedKey(err); ok {
		// Its own commit, and not waited for: a damaged record is met
		// inside read transactions and on the writer's goroutine itself.
		s.told.Add(1)
		go func() {
			defer s.told.Done()
			err := s.change(func(tx *bbolt.Tx, now time.Time) error { return appendEvent(tx, keystore.DamagedEvent(ns, key, now)) })
			if err != nil {
				s.log.Error("store: the event about a damaged record could not be written; its owner hears of it at the next start", "path", s.path, "namespace", ns, "key", key, "err", err)
			}
		}()
	}
}

// firstDamage says whether what (a damaged record's or event's message)
// is met for the first time in this process, counting it then.
func (s *Store) firstDamage(what string) bool {
	if _, seen := s.damage.LoadOrStore(what, true); seen {
		return false
	}
	s.observer().RecordDamaged()
	return true
}

var _ keystore.Store = (*Store)(nil)

// A writeOp decides inside the write transaction and hands back what to
// write; the writer writes it. Deciding never writes, so an op whose
// decision fails (a stale token, a reused key, a record that cannot be
// read) is that op's answer alone and leaves the rest of its batch
// untouched.
type writeOp struct {
	decide func(tx *bbolt.Tx, now time.Time) (boltDecision, error)
	exec   func(tx *bbolt.Tx, now time.Time) error // instead of decide: a change made directly (a sweep)
	result keystore.Result
	err    error
	done   chan struct{}
}

// boltDecision is a Step together with what it was decided on.
type boltDecision struct {
	st          keystore.Step
	prev        *keystore.Record
	prevBreaker []byte
	encoded     []byte                   // st.Record, encoded outside the writer (nil: encode here)
	also        func(tx *bbolt.Tx) error // a write beside st (the resume pace: pace.go)
}

// Open opens (or creates) the store file at path. It refuses, with a
// message naming the file and the way out, a file it cannot trust
// (open.go); it applies and removes a log left by a version that had
// one (legacy.go).
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	db, err := openFile(path, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{path: path, opts: opts, policies: opts.Policies, clock: opts.Clock, log: opts.Logger,
		maxBatch: opts.MaxBatch, sweepMax: opts.SweepBatch,
		ops: make(chan *writeOp, opts.MaxBatch), done: make(chan struct{}),
		commit: opts.commit, obs: opts.Observer}
	s.Operations = keystore.Operations{Driver: s, Policies: opts.Policies, Duplicates: &s.dups}
	s.db.Store(db)
	if err := db.View(func(tx *bbolt.Tx) error {
		s.id = string(bucketValue(tx, bucketMeta, metaID))
		return nil
	}); err != nil {
		db.Close()
		return nil, err
	}
	if gen, err := generation(db); err == nil {
		s.savedGen.Store(gen) // openFile wrote it into the marker
	}
	s.stopGen, s.genDone, s.checked = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go s.writer()
	go s.keepGeneration(s.id, s.stopGen, s.genDone)
	go s.checkInBackground()
	return s, nil
}

// DB returns the bbolt handle, for packages that keep their own buckets in
// the same file. After a storage error the writer reopens the file and the
// handle returned before is closed: ask for it at each use (notify does).
func (s *Store) DB() *bbolt.DB { return s.db.Load() }

// Close finishes the queued writes and closes the file.
func (s *Store) Close() error {
	s.mu.RLock()
	open := !s.closed
	s.mu.RUnlock()
	if open {
		s.told.Wait()
		// The duplicates counted in memory go into the file before it closes.
		if err := s.foldActivity(); err != nil && s.fault.Load() == nil {
			s.log.Warn("store: the last duplicate counts of the activity chart were not written", "err", err)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.ops)
	s.mu.Unlock()
	<-s.done
	close(s.stopGen)
	<-s.genDone
	<-s.checked // bbolt's Close would wait for its read transaction anyway
	s.saveGeneration(s.id)
	return s.db.Load().Close()
}

// Ping reports whether the store is open.
func (s *Store) Ping(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errs.Errorf(errs.StoreUnavailable, "store is closed")
	}
	if f := s.fault.Load(); f != nil {
		return f.unavailable()
	}
	return nil
}

func (s *Store) now() time.Time { return s.clock().UTC().Truncate(time.Millisecond) }

// write queues decide for the writer and waits until the commit holding
// it returned. It waits even when ctx ends: once queued, a write may be
// committed, and its answer must not be lost.
func (s *Store) write(decide func(tx *bbolt.Tx, now time.Time) (boltDecision, error)) (keystore.Result, error) {
	op := &writeOp{decide: decide, done: make(chan struct{})}
	if err := s.enqueue(op); err != nil {
		return keystore.Result{}, err
	}
	<-op.done
	s.noteDamage(op.err)
	return op.result, op.err
}

// change runs fn in a write transaction of its own and waits until it is
// committed. An error from fn fails that transaction alone.
func (s *Store) change(fn func(tx *bbolt.Tx, now time.Time) error) error {
	op := &writeOp{exec: fn, done: make(chan struct{})}
	if err := s.enqueue(op); err != nil {
		return err
	}
	<-op.done
	return op.err
}

func (s *Store) enqueue(op *writeOp) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errs.Errorf(errs.StoreUnavailable, "store is closed")
	}
	s.ops <- op
	return nil
}

func recordKey(ns, key string) []byte {
	b := make([]byte, 0, len(ns)+1+len(key))
	b = append(b, ns...)
	b = append(b, 0)
	return append(b, key...)
}

func splitRecordKey(k []byte) (ns, key string) {
	i := bytes.IndexByte(k, 0)
	if i < 0 {
		return "", string(k)
	}
	return string(k[:i]), string(k[i+1:])
}

func timeIndexKey(t int64, rk []byte) []byte {
	return append(u64(uint64(t)), rk...)
}

func stateIndexKey(st keystore.State, rk []byte) []byte {
	return append([]byte{stateCodes[st]}, rk...)
}

// stateIndexed says which states idx/state covers: the queues a person
// works through. Reserved keys are listed from idx/leases, which holds
// exactly them (one index write less per reserve); completed keys, the
// bulk, are listed by a scan.
func stateIndexed(st keystore.State) bool {
	return st == keystore.StateFailed || st == keystore.StateUnknown
}

func getRecord(tx *bbolt.Tx, ns, key string) (*keystore.Record, error) {
	v := tx.Bucket(bucketKeys).Get(recordKey(ns, key))
	if v == nil {
		return nil, nil
	}
	return decodeRecord(ns, key, v)
}

// putRecord saves next over prev (nil: new key) and keeps the indexes and
// counts in step. Invariant: a record is in idx/expires iff it has
// expires_at, in idx/state iff its state is open, and in idx/leases iff
// reserved — except a key of a reclaim namespace whose lease ran out, whose
// entry the sweeper drops (the next reserve takes the key over).
func putRecord(tx *bbolt.Tx, prev, next *keystore.Record) error {
	return putEncoded(tx, prev, next, nil)
}

// putEncoded is putRecord with next already encoded (v; nil: encode it).
func putEncoded(tx *bbolt.Tx, prev, next *keystore.Record, v []byte) error {
	rk := recordKey(next.Namespace, next.Key)
	if v == nil {
		var err error
		if v, err = encodeRecord(next); err != nil {
			return err
		}
	}
	if err := put(tx, bkKeys, rk, v); err != nil {
		return err
	}
	if prev != nil {
		if err := unindex(tx, prev, rk); err != nil {
			return err
		}
	}
	if next.State == keystore.StateReserved {
		if err := put(tx, bkLeases, timeIndexKey(msPtr(next.LeaseExpiresAt), rk), nil); err != nil {
			return err
		}
	}
	if next.ExpiresAt != nil {
		if err := put(tx, bkExpires, timeIndexKey(ms(*next.ExpiresAt), rk), nil); err != nil {
			return err
		}
	}
	if stateIndexed(next.State) {
		if err := put(tx, bkState, stateIndexKey(next.State, rk), nil); err != nil {
			return err
		}
	}
	if err := indexForConsole(tx, prev, next, rk); err != nil {
		return err
	}
	if err := indexParked(tx, prev, next, rk); err != nil {
		return err
	}
	if err := indexStage(tx, prev, next, rk); err != nil {
		return err
	}
	if err := indexWaits(tx, prev, next, rk); err != nil {
		return err
	}
	if prev == nil || prev.State != next.State {
		if prev != nil {
			if err := addCount(tx, prev.Namespace, prev.State, -1); err != nil {
				return err
			}
		}
		return addCount(tx, next.Namespace, next.State, 1)
	}
	return nil
}

func unindex(tx *bbolt.Tx, r *keystore.Record, rk []byte) error {
	if r.State == keystore.StateReserved {
		if err := del(tx, bkLeases, timeIndexKey(msPtr(r.LeaseExpiresAt), rk)); err != nil {
			return err
		}
	}
	if r.ExpiresAt != nil {
		if err := del(tx, bkExpires, timeIndexKey(ms(*r.ExpiresAt), rk)); err != nil {
			return err
		}
	}
	if stateIndexed(r.State) {
		return del(tx, bkState, stateIndexKey(r.State, rk))
	}
	return nil
}

func deleteRecord(tx *bbolt.Tx, r *keystore.Record) error {
	rk := recordKey(r.Namespace, r.Key)
	if err := unindex(tx, r, rk); err != nil {
		return err
	}
	if err := unindexForConsole(tx, r, rk); err != nil {
		return err
	}
	if err := indexParked(tx, r, &keystore.Record{}, rk); err != nil {
		return err
	}
	if err := indexStage(tx, r, nil, rk); err != nil {
		return err
	}
	if err := indexWaits(tx, r, nil, rk); err != nil {
		return err
	}
	if err := del(tx, bkKeys, rk); err != nil {
		return err
	}
	return addCount(tx, r.Namespace, r.State, -1)
}

func addCount(tx *bbolt.Tx, ns string, st keystore.State, delta int64) error {
	b := tx.Bucket(bucketCounts)
	k := append(append([]byte(ns), 0), stateCodes[st])
	var n int64
	if v := b.Get(k); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	n += delta
	if n <= 0 {
		return del(tx, bkCounts, k)
	}
	return put(tx, bkCounts, k, u64(uint64(n)))
}

func getBreaker(tx *bbolt.Tx, dest string) (*keystore.Breaker, []byte, error) {
	v := tx.Bucket(bucketBreakers).Get([]byte(dest))
	if v == nil {
		return keystore.NewBreaker(dest), nil, nil
	}
	b, err := decodeBreaker(dest, v)
	return b, v, err
}

// applyStep writes what a boltDecision asks for.
func applyStep(tx *bbolt.Tx, prev *keystore.Record, prevBreaker []byte, st keystore.Step) error {
	return applyDecision(tx, boltDecision{st: st, prev: prev, prevBreaker: prevBreaker})
}

func applyDecision(tx *bbolt.Tx, d boltDecision) error {
	st, prevBreaker := d.st, d.prevBreaker
	if st.Record != nil {
		if err := putEncoded(tx, d.prev, st.Record, d.encoded); err != nil {
			return err
		}
	}
	if st.Breaker != nil {
		v, err := encodeBreaker(st.Breaker)
		if err != nil {
			return err
		}
		// A breaker that only saw its first namespace is kept: a second
		// one's reserve must find it (keystore/breaker_view.go).
		idle := prevBreaker == nil && st.Breaker.State == keystore.BreakerClosed && st.Breaker.ConsecutiveFailures == 0 &&
			len(st.Breaker.SeenNamespaces) == 0 && len(st.Breaker.Views) == 0
		if !idle && !bytes.Equal(v, prevBreaker) {
			if err := put(tx, bkBreakers, []byte(st.Breaker.Destination), v); err != nil {
				return err
			}
		}
	}
	for _, ev := range st.Events {
		if err := appendEvent(tx, ev); err != nil {
			return err
		}
	}
	return nil
}

func appendEvent(tx *bbolt.Tx, ev keystore.Event) error {
	seq, err := nextSequence(tx, bkEvents)
	if err != nil {
		return err
	}
	v, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	return put(tx, bkEvents, u64(seq), v)
}

// DecideKey implements keystore.Driver: op is decided inside the write
// transaction, on the key's record and the breaker op names.
func (s *Store) DecideKey(_ context.Context, op keystore.Op) (keystore.Result, error) {
	decide := func(tx *bbolt.Tx, now time.Time) (boltDecision, error) {
		cur, err := getRecord(tx, op.Namespace, op.Key)
		if err != nil {
			return boltDecision{}, err
		}
		var br *keystore.Breaker
		var brRaw []byte
		if dest := op.BreakerOf(cur); dest != "" {
			if br, brRaw, err = getBreaker(tx, dest); err != nil {
				return boltDecision{}, err
			}
		}
		st, err := op.Decide(cur, br, now)
		return boltDecision{st: st, prev: cur, prevBreaker: brRaw}, err
	}
	if op.ReadFirst {
		return s.readFirst(op, decide)
	}
	return s.write(decide)
}

// readFirst carries out op (reserve) whose answers mostly change nothing:
// most copies of an event find the key already reserved or done. Such
// answers are decided in a read transaction without waiting for a commit.
// What writes goes to the writer with its record encoded, and the writer
// applies it as decided if the key and the breaker are byte for byte what
// this decision read; else it decides again, and alone may accept.
func (s *Store) readFirst(op keystore.Op, decide func(tx *bbolt.Tx, now time.Time) (boltDecision, error)) (keystore.Result, error) {
	var res keystore.Result
	var pre boltDecision
	var preKey, preBreaker []byte
	var dest string
	writes := false
	err := s.view(func(tx *bbolt.Tx) error {
		d, err := decide(tx, s.now())
		if err != nil || d.st.Record == nil && d.st.Breaker == nil && len(d.st.Events) == 0 {
			res = d.st.Result
			return err
		}
		pre, writes = d, true
		preKey = bytes.Clone(tx.Bucket(bucketKeys).Get(recordKey(op.Namespace, op.Key)))
		if dest = op.BreakerOf(d.prev); dest != "" {
			preBreaker = bytes.Clone(tx.Bucket(bucketBreakers).Get([]byte(dest)))
		}
		return nil
	})
	if !writes || err != nil {
		return res, s.readErr(err)
	}
	if pre.st.Record != nil {
		if pre.encoded, err = encodeRecord(pre.st.Record); err != nil {
			return keystore.Result{}, err
		}
	}
	pre.prevBreaker = preBreaker
	return s.write(func(tx *bbolt.Tx, now time.Time) (boltDecision, error) {
		if bytes.Equal(tx.Bucket(bucketKeys).Get(recordKey(op.Namespace, op.Key)), preKey) &&
			(dest == "" || bytes.Equal(tx.Bucket(bucketBreakers).Get([]byte(dest)), preBreaker)) {
			return pre, nil
		}
		return decide(tx, now) // a write came between: decide on what is there now
	})
}

// DecideBreaker implements keystore.Driver: op is decided inside the
// write transaction on the destination's breaker.
func (s *Store) DecideBreaker(_ context.Context, op keystore.BreakerOp) error {
	_, err := s.write(func(tx *bbolt.Tx, now time.Time) (boltDecision, error) {
		br, raw, err := getBreaker(tx, op.Destination)
		if err != nil {
			return boltDecision{}, err
		}
		st, err := op.Decide(br, raw != nil, now)
		return boltDecision{st: st, prevBreaker: raw}, err
	})
	return err
}

// Lookup implements Store.
func (s *Store) Lookup(_ context.Context, ns, key string) (keystore.Result, error) {
	key, err := keystore.CheckIdentity(ns, key)
	if err != nil {
		return keystore.Result{}, err
	}
	var res keystore.Result
	err = s.view(func(tx *bbolt.Tx) error {
		cur, err := getRecord(tx, ns, key)
		if err != nil {
			return err
		}
		res = keystore.Result{Namespace: ns, Key: key, Outcome: keystore.OutcomeAbsent}
		if cur != nil {
			res.Outcome, res.Record = keystore.OutcomeFound, cur
		}
		return nil
	})
	return res, s.readErr(err)
}

func (s *Store) readErr(err error) error {
	if err == nil {
		return nil
	}
	s.noteDamage(err)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return errs.Errorf(errs.StoreUnavailable, "store is closed")
	}
	return err
}

// List implements Store. The cursor is the last bbolt key of the page.
func (s *Store) List(_ context.Context, q keystore.ListQuery) (keystore.Page, error) {
	q, err := q.Normalize()
	if err != nil {
		return keystore.Page{}, err
	}
	var after []byte
	if q.Cursor != "" {
		if after, err = base64.RawURLEncoding.DecodeString(q.Cursor); err != nil {
			return keystore.Page{}, errs.InvalidField("cursor", "cursor", "cursor is not one this server returned")
		}
	}
	var page keystore.Page
	err = s.view(func(tx *bbolt.Tx) error {
		walk := listWalkOf(q)
		keys := tx.Bucket(bucketKeys)
		c := tx.Bucket(walk.bucket).Cursor()
		k, v, err := walk.seek(c, after)
		if err != nil {
			return err
		}
		var lastKey []byte
		for ; k != nil && bytes.HasPrefix(k, walk.prefix); k, v = c.Next() {
			rk := k[walk.skip:]
			if walk.skip > 0 {
				if !bytes.HasPrefix(rk, walk.nsPrefix) {
					continue
				}
				if v = keys.Get(rk); v == nil {
					continue // an index entry without its record: never shown
				}
			}
			ns, key := splitRecordKey(rk)
			r, err := decodeRecord(ns, key, v)
			if errs.CodeOf(err) == errs.RecordDamaged {
				s.noteDamage(err) // left out of listings; its key answers record_damaged
				continue
			}
			if err != nil {
				return err
			}
			if q.State != "" && r.State != q.State || q.Owner != "" && r.Owner != q.Owner {
				continue
			}
			if len(page.Items) == q.Limit {
				page.NextCursor = base64.RawURLEncoding.EncodeToString(lastKey)
				return nil
			}
			page.Items = append(page.Items, r)
			lastKey = append(lastKey[:0], k...)
		}
		return nil
	})
	return page, s.readErr(err)
}

// listWalk is the bucket List walks for a query and how its keys lead to
// records, so the choice of index is made in one place.
type listWalk struct {
	bucket   []byte
	skip     int    // bytes of an index key before the record key; 0 on bucketKeys
	prefix   []byte // the walk ends at the first key without it
	nsPrefix []byte // what the record key of an index entry must start with
}

// listWalkOf picks the walk of q: the owner index (failed and unknown
// keys; reserved ones are on the lease index), the unknown keys in the
// order they went unknown, the state index, the lease index (reserved
// keys, in lease order, filtered by namespace), or all keys; a key prefix
// narrows the walk of each index that is ordered by key.
func listWalkOf(q keystore.ListQuery) listWalk {
	var w listWalk
	if q.Namespace != "" {
		w.nsPrefix = recordKey(q.Namespace, q.KeyPrefix)
	}
	w.bucket = bucketKeys
	switch {
	case q.Owner != "" && q.State != keystore.StateReserved:
		w.bucket, w.skip = bucketOwners, len(q.Owner)+1
		w.prefix = ownerIndexKey(q.Owner, w.nsPrefix)
	case q.Oldest:
		w.bucket, w.skip = bucketWaiting, 8
	case stateIndexed(q.State):
		w.bucket, w.skip = bucketState, 1
		w.prefix = append([]byte{stateCodes[q.State]}, w.nsPrefix...)
	case q.State == keystore.StateReserved && q.KeyPrefix == "":
		w.bucket, w.skip = bucketLeases, 8
	default:
		w.prefix = w.nsPrefix
	}
	return w
}

// seek puts c on the first entry of the page: just after the cursor key
// (refusing one that this walk cannot have returned, so a page never skips
// entries), or at the start of the walk.
func (w listWalk) seek(c *bbolt.Cursor, after []byte) (k, v []byte, err error) {
	if after == nil {
		k, v = c.Seek(w.prefix)
		return k, v, nil
	}
	if len(after) <= w.skip || bytes.IndexByte(after[w.skip:], 0) < 0 {
		return nil, nil, errs.InvalidField("cursor", "cursor", "cursor is not one this server returned")
	}
	if !bytes.HasPrefix(after, w.prefix) {
		return nil, nil, errs.InvalidField("cursor", "cursor", "cursor belongs to another listing")
	}
	k, v = c.Seek(after)
	if bytes.Equal(k, after) {
		k, v = c.Next()
	}
	return k, v, nil
}
