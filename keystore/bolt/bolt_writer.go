package bolt

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// The write path of Store: two goroutines in a pipeline.
//
// The writer takes everything queued, decides and applies it in the open
// bbolt write transaction (one group), appends the group's changes to the
// log, and hands the group to the syncer. It does not wait for the disk:
// the next group is decided while the previous one is being synced.
//
// The syncer takes every group handed over since its last sync, syncs the
// log once for all of them, publishes their changes to the overlay and
// answers them, in order. A group that changed nothing (a duplicate decided
// in the transaction, a stale token) is answered only after the groups
// before it are durable, since its answer may rest on them.
//
// Readers see the committed file, plus the overlay: the records and
// breakers whose changes were answered but are not yet committed. Lookup
// and Reserve read a key through the overlay; listings, counts and events
// ask the writer to commit first (flush), so they never miss an answered
// write.

// wtx is the open write transaction. Every change made through it is also
// logged.
type wtx struct {
	tx    *bbolt.Tx
	log   []byte     // changes of the current group
	pub   []ovChange // the current group's changes to keys and breakers
	start time.Time
}

// ovChange is one overlay entry: a key of bucket keys or breakers, with
// its value after the change (nil: deleted).
type ovChange struct {
	key string // bucket code, then the bbolt key
	val []byte
}

func ovKey(bucket int, k []byte) string { return string(append([]byte{byte(bucket)}, k...)) }

func (w *wtx) put(bucket int, k, v []byte) error {
	if err := bucketFor(w.tx, bucket).Put(k, v); err != nil {
		return err
	}
	w.record(walPut, bucket, k, v)
	return nil
}

func (w *wtx) delete(bucket int, k []byte) error {
	if err := bucketFor(w.tx, bucket).Delete(k); err != nil {
		return err
	}
	w.record(walDelete, bucket, k, nil)
	return nil
}

func (w *wtx) nextSequence(bucket int) (uint64, error) {
	seq, err := bucketFor(w.tx, bucket).NextSequence()
	if err == nil {
		w.record(walSequence, bucket, nil, u64(seq))
	}
	return seq, err
}

func (w *wtx) record(kind byte, bucket int, k, v []byte) {
	w.log = appendWALOp(w.log, kind, bucket, k, v)
	if bucket == bkKeys || bucket == bkBreakers {
		var val []byte
		if kind == walPut {
			val = v
		}
		w.pub = append(w.pub, ovChange{ovKey(bucket, k), val})
	}
}

// group is a set of writeOps decided together.
type group struct {
	ops []*writeOp
	pub []ovChange
	seq uint64 // the log record it waits for: its own, or the last before it
}

// writerState is owned by the writer goroutine.
type writerState struct {
	w      *wtx
	logged [][]byte // the open transaction's log records, to apply again after a failed write
	size   int64    // of the log
	off    int64    // where the next record goes: what the open transaction logged
	seq    uint64   // last record written
	gen    uint64   // generation of the records since the last commit
	frame  []byte
	timer  *time.Timer
}

var errBroken = &keystore.Error{Code: keystore.EStoreUnavailable, Message: "the store stopped after a disk error; restart n8n-guard (it applies its log on start)"}

// overlay holds what the syncer answered and the writer has not committed.
type overlay struct {
	mu sync.RWMutex
	m  map[string][]byte
	n  atomic.Int64 // len(m): readers skip the lock when it is empty
}

func (o *overlay) get(bucket int, k []byte) (v []byte, ok bool) {
	if o.n.Load() == 0 {
		return nil, false
	}
	var buf [256]byte
	key := append(append(buf[:0], byte(bucket)), k...)
	o.mu.RLock()
	v, ok = o.m[string(key)] // no allocation for the lookup
	o.mu.RUnlock()
	return v, ok
}

func (o *overlay) publish(changes []ovChange) {
	if len(changes) == 0 {
		return
	}
	o.mu.Lock()
	for _, c := range changes {
		o.m[c.key] = c.val
	}
	o.n.Store(int64(len(o.m)))
	o.mu.Unlock()
}

func (o *overlay) reset() {
	o.mu.Lock()
	clear(o.m)
	o.n.Store(0)
	o.mu.Unlock()
}

func (s *Store) broken() bool { return s.fatal.Load() != nil }

func (s *Store) setBroken(what string, err error) {
	if s.fatal.CompareAndSwap(nil, &err) {
		s.log.Error("store stopped: "+what, "err", err)
	}
}

func (s *Store) writer(ws *writerState) {
	defer close(s.done)
	synced := make(chan struct{})
	go s.syncer(synced)
	batch := make([]*writeOp, 0, s.maxBatch)
	for {
		op, ok := s.nextOp(ws)
		if op == nil && ok {
			s.commitTx(ws) // the transaction is due
			continue
		}
		if !ok {
			s.commitTx(ws)
			s.sq.mu.Lock()
			s.sq.closed = true
			s.sq.cond.Broadcast()
			s.sq.mu.Unlock()
			<-synced
			return
		}
		batch = append(batch[:0], op)
	fill:
		for len(batch) < s.maxBatch {
			select {
			case op, ok := <-s.ops:
				if !ok {
					break fill
				}
				batch = append(batch, op)
			default:
				break fill
			}
		}
		// A flush ends a group: what came before it is committed before it
		// is answered. A sweep is a group of its own, so that its failure
		// fails no one else.
		start := 0
		for i, op := range batch {
			switch {
			case op.flush:
				s.runGroup(ws, batch[start:i])
				s.commitTx(ws)
				if s.broken() {
					op.err = errBroken
				}
				close(op.done)
				start = i + 1
			case op.exec != nil:
				s.runGroup(ws, batch[start:i])
				s.runGroup(ws, batch[i:i+1])
				start = i + 1
			}
		}
		s.runGroup(ws, batch[start:])
		if ws.w != nil && (time.Since(ws.w.start) >= s.commitEvery || ws.off >= maxTxLog) {
			s.commitTx(ws)
		}
	}
}

// maxTxLog also ends the open transaction: when its log has grown this far. A
// commit writes a new copy of every page the transaction dirtied while the
// old copies are still the committed state, so the file must hold both,
// and the commit holds the writer up for as long as it writes them. With
// random keys at a million records, 250 ms of writes (about 3,400 records)
// left the file at 308 bytes per record; and a retention sweep's groups
// (1,000 deletes each) piled into one commit that kept a reserve waiting
// 99 ms (docs/performance.md).
const maxTxLog = 256 << 10

// nextOp waits for the next op. With a transaction open it waits only
// until the transaction is due, and then returns (nil, true).
func (s *Store) nextOp(ws *writerState) (*writeOp, bool) {
	if ws.w == nil {
		op, ok := <-s.ops
		return op, ok
	}
	ws.timer.Reset(max(time.Until(ws.w.start.Add(s.commitEvery)), 0))
	defer ws.timer.Stop()
	select {
	case op, ok := <-s.ops:
		return op, ok
	case <-ws.timer.C:
		return nil, true
	}
}

// runGroup decides and applies ops in the open transaction and hands them
// to the syncer. Only a failed write (not a failed decision) fails the
// group, and then every caller in it gets store_unavailable: nothing of
// the group was saved.
func (s *Store) runGroup(ws *writerState, ops []*writeOp) {
	if len(ops) == 0 {
		return
	}
	fail := func(err error) {
		for _, op := range ops {
			op.result, op.err = keystore.Result{}, err
			close(op.done)
		}
	}
	if s.broken() {
		fail(errBroken)
		return
	}
	if ws.w == nil {
		tx, err := s.db.Begin(true)
		if err != nil {
			s.log.Error("store write failed", "writes", len(ops), "err", err)
			fail(&keystore.Error{Code: keystore.EStoreUnavailable, Message: "the store could not save the change; nothing was recorded"})
			return
		}
		ws.w = &wtx{tx: tx, start: time.Now()}
	}
	w := ws.w
	w.log, w.pub = w.log[:0], nil
	if err := s.apply(w, ops); err != nil {
		s.log.Error("store write failed", "writes", len(ops), "err", err)
		s.reopenTx(ws)
		fail(&keystore.Error{Code: keystore.EStoreUnavailable, Message: "the store could not save the change; nothing was recorded"})
		return
	}
	g := &group{ops: slices.Clone(ops), pub: w.pub} // the writer reuses its batch
	if len(w.log) > 0 {
		s.dirty.Store(true)
		ws.frame = appendWALRecord(ws.frame[:0], ws.gen, ws.seq+1, w.log)
		if ws.off+int64(len(ws.frame)) > ws.size {
			// The log is full: commit instead, which makes this group
			// durable too.
			s.commitTx(ws)
			if s.broken() {
				fail(errBroken)
				return
			}
			g.pub = nil
		} else {
			ws.off += int64(len(ws.frame))
			ws.seq++
			ws.logged = append(ws.logged, append([]byte(nil), w.log...))
			s.push(g, ws.frame, ws.seq)
			return
		}
	}
	s.push(g, nil, ws.seq)
	if ws.w != nil && !s.dirty.Load() {
		// Nothing to commit: give bbolt's write lock back at once (the
		// notify outbox writes to the same file).
		_ = ws.w.tx.Rollback()
		ws.w = nil
	}
}

func (s *Store) apply(w *wtx, ops []*writeOp) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in write: %v", p)
		}
	}()
	now := s.now()
	for _, op := range ops {
		if op.exec != nil {
			if err := op.exec(w, now); err != nil {
				return err
			}
			continue
		}
		d, err := op.decide(w.tx, now)
		op.result, op.err = d.st.Result, err
		if err != nil {
			continue
		}
		if err := applyStep(w, d.prev, d.prevBreaker, d.st); err != nil {
			return err
		}
	}
	return nil
}

// reopenTx throws away a transaction a write failed in, and applies the
// groups logged in it again, in a new one.
func (s *Store) reopenTx(ws *writerState) {
	start := ws.w.start
	_ = ws.w.tx.Rollback()
	ws.w = nil
	tx, err := s.db.Begin(true)
	if err != nil {
		s.setBroken("reopen the write transaction", err)
		return
	}
	for _, rec := range ws.logged {
		if err := replayWAL(tx, rec); err != nil {
			_ = tx.Rollback()
			s.setBroken("apply the log again", err)
			return
		}
	}
	ws.w = &wtx{tx: tx, start: start}
}

// commitTx commits the open transaction once every group in it is
// answered, then empties the overlay and starts the log over.
func (s *Store) commitTx(ws *writerState) {
	if ws.w == nil {
		return
	}
	s.drain()
	tx := ws.w.tx
	ws.w = nil
	if s.broken() || !s.dirty.Load() {
		_ = tx.Rollback() // nothing to save, or nothing that may be saved
		return
	}
	gen := newGen()
	b := tx.Bucket(bucketWAL)
	err := b.Put(walApplied, u64(ws.seq))
	if err == nil {
		err = b.Put(walGen, u64(gen))
	}
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	if err != nil {
		// Everything answered is in the log; a restart applies it.
		s.setBroken("commit", err)
		return
	}
	s.overlay.reset()
	s.dirty.Store(false)
	s.restartLog()
	ws.off, ws.gen = 0, gen
	ws.logged = ws.logged[:0]
}

// syncQueue holds the log records the writer appended and the groups it
// handed over, until they are durable and answered.
//
// The syncer writes and syncs the records: one pwrite and one fdatasync for
// everything appended since its last sync, while the writer goes on
// deciding. (On these machines a pwrite costs about 60 µs of CPU and an
// fdatasync about 90 µs, so they are paid per sync, not per group; a
// second syncer, overlapping syncs, gave more syncs but no more answers.)
// A group is answered, in order, once the record it waits for is durable.
type syncQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte // records appended and not yet taken by the syncer
	end     int64  // log offset just past buf
	written uint64 // last record appended
	durable uint64 // every record up to this one is synced
	syncing bool
	pending []*group
	closed  bool
}

// push hands g to the syncer, with the log record it appended (nil if
// none) as record seq.
func (s *Store) push(g *group, frame []byte, seq uint64) {
	q := &s.sq
	q.mu.Lock()
	defer q.mu.Unlock()
	if frame != nil {
		q.buf = append(q.buf, frame...)
		q.end += int64(len(frame))
		q.written = seq
	}
	g.seq = q.written
	switch {
	case s.broken():
		s.answer(g, errBroken)
	case g.seq <= q.durable:
		// Nothing to wait for: every group before it is answered too.
		s.answer(g, nil)
	default:
		q.pending = append(q.pending, g)
		q.cond.Broadcast()
	}
}

// answer publishes g's changes and wakes its callers; with err, fails them.
func (s *Store) answer(g *group, err error) {
	if err == nil {
		s.overlay.publish(g.pub)
	}
	for _, op := range g.ops {
		if err != nil {
			op.result, op.err = keystore.Result{}, err
		}
		close(op.done)
	}
}

// drain waits until every group handed over is answered.
func (s *Store) drain() {
	q := &s.sq
	q.mu.Lock()
	for len(q.pending) > 0 || q.syncing {
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// restartLog makes the next record go to the start of the log. Only after
// a commit, with nothing pending.
func (s *Store) restartLog() {
	q := &s.sq
	q.mu.Lock()
	q.buf, q.end = q.buf[:0], 0
	q.mu.Unlock()
}

func (s *Store) syncer(done chan<- struct{}) {
	defer close(done)
	q := &s.sq
	q.mu.Lock()
	defer q.mu.Unlock()
	var spare []byte
	for {
		for !q.closed && len(q.buf) == 0 {
			q.cond.Wait()
		}
		if len(q.buf) == 0 {
			return // closed, and nothing left to sync
		}
		buf, off, upTo := q.buf, q.end-int64(len(q.buf)), q.written
		q.buf, spare = spare[:0], nil
		var err error
		if s.broken() {
			// After a failed write or sync nothing more is written: what
			// comes back on restart must not depend on chance.
			err = errBroken
		} else {
			q.syncing = true
			q.mu.Unlock()
			if _, err = s.walFile.WriteAt(buf, off); err == nil {
				err = syscall.Fdatasync(int(s.walFile.Fd()))
			}
			q.mu.Lock()
		}
		q.syncing, spare = false, buf
		if err != nil {
			s.setBroken("write the log", err)
			// Every group waiting rests on what this sync did not save.
			for _, g := range q.pending {
				s.answer(g, errBroken)
			}
			q.pending = q.pending[:0]
		} else {
			q.durable = upTo
		}
		n := 0
		for n < len(q.pending) && q.pending[n].seq <= q.durable {
			s.answer(q.pending[n], nil)
			n++
		}
		q.pending = append(q.pending[:0], q.pending[n:]...)
		q.cond.Broadcast()
	}
}

// flush commits the writes answered so far, for readers that walk the
// committed file (listings, counts, events).
func (s *Store) flush() error {
	if !s.dirty.Load() {
		return nil
	}
	op := &writeOp{flush: true, done: make(chan struct{})}
	if err := s.enqueue(op); err != nil {
		return err
	}
	<-op.done
	return op.err
}

// snapshot is how a reader sees one key (and its destination's breaker):
// through the overlay, else in the committed file. The zero snapshot reads
// the file (or the writer's transaction) alone. The overlay is read
// before the file's read transaction begins: an entry the writer removes
// after committing is then in the file the transaction sees.
type snapshot struct {
	rec, br       []byte
	hasRec, hasBr bool
	needBr        bool
}

func (s *Store) snapshot(ns, key, dest string) snapshot {
	sn := snapshot{needBr: dest != ""}
	sn.rec, sn.hasRec = s.overlay.get(bkKeys, recordKey(ns, key))
	if dest != "" {
		sn.br, sn.hasBr = s.overlay.get(bkBreakers, []byte(dest))
	}
	return sn
}

// view runs fn on the snapshot: on the overlay alone when it holds all fn
// reads (then tx is nil), else in a bbolt read transaction.
func (sn snapshot) view(db *bbolt.DB, fn func(tx *bbolt.Tx) error) error {
	if sn.hasRec && (sn.hasBr || !sn.needBr) {
		return fn(nil)
	}
	return db.View(fn)
}

func (sn snapshot) record(tx *bbolt.Tx, ns, key string) (*keystore.Record, error) {
	if !sn.hasRec {
		return getRecord(tx, ns, key)
	}
	if sn.rec == nil {
		return nil, nil
	}
	return decodeRecord(ns, key, sn.rec)
}

func (sn snapshot) breaker(tx *bbolt.Tx, dest string) (*keystore.Breaker, []byte, error) {
	if !sn.hasBr {
		return getBreaker(tx, dest)
	}
	if sn.br == nil {
		return keystore.NewBreaker(dest), nil, nil
	}
	b, err := decodeBreaker(dest, sn.br)
	return b, sn.br, err
}
