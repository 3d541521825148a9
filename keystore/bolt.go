package keystore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
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
	allBuckets     = [][]byte{bucketKeys, bucketState, bucketLeases, bucketExpires, bucketCounts, bucketBreakers, bucketEvents}
)

// BoltOptions configure OpenBolt.
type BoltOptions struct {
	Policies    Policies
	Clock       Clock
	Logger      *slog.Logger
	LockTimeout time.Duration // how long to wait for another process's file lock (default 2s)
	// MaxBatch bounds how many writes share one commit (default 2048).
	MaxBatch int
	// SweepBatch bounds the deletes of one sweep transaction (default 1000).
	SweepBatch int
}

// BoltStore is the embedded Store: one bbolt file, every write fsync'd
// before it is answered.
//
// Writes go through one writer goroutine that commits everything queued
// while the previous commit was being fsync'd (group commit). bbolt's own
// Batch waits a fixed delay for a batch to fill, which caps throughput at
// concurrency/delay; starting the next commit as soon as the previous one
// is durable does not wait for anything.
type BoltStore struct {
	db       *bolt.DB
	policies Policies
	clock    Clock
	log      *slog.Logger
	maxBatch int
	sweepMax int

	mu     sync.RWMutex // guards closed and sends on ops
	closed bool
	ops    chan *writeOp
	done   chan struct{}
}

var _ Store = (*BoltStore)(nil)

// A writeOp decides inside the write transaction and hands back what to
// write; commit writes it. Deciding never writes, so an op whose boltDecision
// fails (a stale token, a reused key, a record that cannot be read) is
// that op's answer alone and leaves the rest of its batch untouched.
type writeOp struct {
	decide func(tx *bolt.Tx, now time.Time) (boltDecision, error)
	result Result
	err    error
	done   chan struct{}
}

// boltDecision is a step together with what it was decided on.
type boltDecision struct {
	st          step
	prev        *Record
	prevBreaker []byte
}

// OpenBolt opens (or creates) the store file at path.
func OpenBolt(path string, opts BoltOptions) (*BoltStore, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 2 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 2048
	}
	if opts.SweepBatch <= 0 {
		opts.SweepBatch = 1000
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      opts.LockTimeout,
		FreelistType: bolt.FreelistMapType,
		// The freelist is rebuilt on open instead of written at every
		// commit: fewer pages per commit, the same durability.
		NoFreelistSync: true,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: the file is locked by another process (is another n8n-guard running on this data folder?)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: create buckets: %w", path, err)
	}
	s := &BoltStore{db: db, policies: opts.Policies, clock: opts.Clock, log: opts.Logger,
		maxBatch: opts.MaxBatch, sweepMax: opts.SweepBatch,
		ops: make(chan *writeOp, opts.MaxBatch), done: make(chan struct{})}
	go s.writer()
	return s, nil
}

// DB returns the bbolt handle, for packages that keep their own buckets in
// the same file.
func (s *BoltStore) DB() *bolt.DB { return s.db }

// Close finishes the queued writes and closes the file.
func (s *BoltStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.ops)
	s.mu.Unlock()
	<-s.done
	return s.db.Close()
}

// Ping reports whether the store is open.
func (s *BoltStore) Ping(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Errorf(EStoreUnavailable, "store is closed")
	}
	return nil
}

func (s *BoltStore) now() time.Time { return s.clock().UTC().Truncate(time.Millisecond) }

// write queues fn for the next group commit and waits until that commit is
// on disk. It waits even when ctx ends: once queued, a write may be
// committed, and its answer must not be lost.
func (s *BoltStore) write(decide func(tx *bolt.Tx, now time.Time) (boltDecision, error)) (Result, error) {
	op := &writeOp{decide: decide, done: make(chan struct{})}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return Result{}, Errorf(EStoreUnavailable, "store is closed")
	}
	s.ops <- op
	s.mu.RUnlock()
	<-op.done
	return op.result, op.err
}

func (s *BoltStore) writer() {
	defer close(s.done)
	batch := make([]*writeOp, 0, s.maxBatch)
	for op := range s.ops {
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
		s.commit(batch)
	}
}

// commit runs a batch in one transaction. Only a failed write (not a
// failed boltDecision) fails the batch, and then every caller in it gets
// store_unavailable: nothing of the batch was saved.
func (s *BoltStore) commit(batch []*writeOp) {
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic in write: %v", p)
			}
		}()
		return s.db.Update(func(tx *bolt.Tx) error {
			for _, op := range batch {
				d, err := op.decide(tx, s.now())
				op.result, op.err = d.st.result, err
				if err != nil {
					continue
				}
				if err := applyStep(tx, d.prev, d.prevBreaker, d.st); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	if err != nil {
		s.log.Error("store commit failed", "writes", len(batch), "err", err)
		for _, op := range batch {
			op.result, op.err = Result{}, &Error{Code: EStoreUnavailable, Message: "the store could not save the change; nothing was recorded"}
		}
	}
	for _, op := range batch {
		close(op.done)
	}
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

// timeIndex opens a time-ordered index for writing. New entries land at or
// near its end, so its pages are filled completely before they split;
// bbolt's default of half-full pages would double the index on disk.
func timeIndex(tx *bolt.Tx, name []byte) *bolt.Bucket {
	b := tx.Bucket(name)
	b.FillPercent = 0.95
	return b
}

func timeIndexKey(t int64, rk []byte) []byte {
	return append(u64(uint64(t)), rk...)
}

func stateIndexKey(st State, rk []byte) []byte {
	return append([]byte{stateCodes[st]}, rk...)
}

// openState says which states are still open (not completed).
func openState(st State) bool { return st != StateCompleted }

// stateIndexed says which states idx/state covers: the queues a person
// works through. Reserved keys are listed from idx/leases, which holds
// exactly them (one index write less per reserve); completed keys, the
// bulk, are listed by a scan.
func stateIndexed(st State) bool { return st == StateFailed || st == StateUnknown }

func getRecord(tx *bolt.Tx, ns, key string) (*Record, error) {
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
func putRecord(tx *bolt.Tx, prev, next *Record) error {
	rk := recordKey(next.Namespace, next.Key)
	v, err := encodeRecord(next)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bucketKeys).Put(rk, v); err != nil {
		return err
	}
	if prev != nil {
		if err := unindex(tx, prev, rk); err != nil {
			return err
		}
	}
	if next.State == StateReserved {
		if err := timeIndex(tx, bucketLeases).Put(timeIndexKey(msPtr(next.LeaseExpiresAt), rk), nil); err != nil {
			return err
		}
	}
	if next.ExpiresAt != nil {
		if err := timeIndex(tx, bucketExpires).Put(timeIndexKey(ms(*next.ExpiresAt), rk), nil); err != nil {
			return err
		}
	}
	if stateIndexed(next.State) {
		if err := tx.Bucket(bucketState).Put(stateIndexKey(next.State, rk), nil); err != nil {
			return err
		}
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

func unindex(tx *bolt.Tx, r *Record, rk []byte) error {
	if r.State == StateReserved {
		if err := tx.Bucket(bucketLeases).Delete(timeIndexKey(msPtr(r.LeaseExpiresAt), rk)); err != nil {
			return err
		}
	}
	if r.ExpiresAt != nil {
		if err := tx.Bucket(bucketExpires).Delete(timeIndexKey(ms(*r.ExpiresAt), rk)); err != nil {
			return err
		}
	}
	if stateIndexed(r.State) {
		return tx.Bucket(bucketState).Delete(stateIndexKey(r.State, rk))
	}
	return nil
}

func deleteRecord(tx *bolt.Tx, r *Record) error {
	rk := recordKey(r.Namespace, r.Key)
	if err := unindex(tx, r, rk); err != nil {
		return err
	}
	if err := tx.Bucket(bucketKeys).Delete(rk); err != nil {
		return err
	}
	return addCount(tx, r.Namespace, r.State, -1)
}

func addCount(tx *bolt.Tx, ns string, st State, delta int64) error {
	b := tx.Bucket(bucketCounts)
	k := append(append([]byte(ns), 0), stateCodes[st])
	var n int64
	if v := b.Get(k); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	n += delta
	if n <= 0 {
		return b.Delete(k)
	}
	return b.Put(k, u64(uint64(n)))
}

func getBreaker(tx *bolt.Tx, dest string) (*Breaker, []byte, error) {
	v := tx.Bucket(bucketBreakers).Get([]byte(dest))
	if v == nil {
		return newBreaker(dest), nil, nil
	}
	b, err := decodeBreaker(dest, v)
	return b, v, err
}

// applyStep writes what a boltDecision asks for.
func applyStep(tx *bolt.Tx, prev *Record, prevBreaker []byte, st step) error {
	if st.record != nil {
		if err := putRecord(tx, prev, st.record); err != nil {
			return err
		}
	}
	if st.breaker != nil {
		v, err := encodeBreaker(st.breaker)
		if err != nil {
			return err
		}
		idle := prevBreaker == nil && st.breaker.State == BreakerClosed && st.breaker.ConsecutiveFailures == 0
		if !idle && !bytes.Equal(v, prevBreaker) {
			if err := tx.Bucket(bucketBreakers).Put([]byte(st.breaker.Destination), v); err != nil {
				return err
			}
		}
	}
	for _, ev := range st.events {
		if err := appendEvent(tx, ev); err != nil {
			return err
		}
	}
	return nil
}

func appendEvent(tx *bolt.Tx, ev Event) error {
	b := tx.Bucket(bucketEvents)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	v, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	return b.Put(u64(seq), v)
}

// Reserve implements Store. Most copies of an event find the key already
// reserved or done; such answers change nothing, so they are decided on a
// read snapshot without waiting for a commit. Anything that writes is
// decided again inside the write transaction, which alone may accept.
func (s *BoltStore) Reserve(_ context.Context, req ReserveRequest) (Result, error) {
	req, fp, err := req.normalize()
	if err != nil {
		return Result{}, err
	}
	np := s.policies.Namespace(req.Namespace)
	decide := func(tx *bolt.Tx, now time.Time) (boltDecision, error) {
		cur, err := getRecord(tx, req.Namespace, req.Key)
		if err != nil {
			return boltDecision{}, err
		}
		var br *Breaker
		var brRaw []byte
		if req.Destination != "" {
			if br, brRaw, err = getBreaker(tx, req.Destination); err != nil {
				return boltDecision{}, err
			}
		}
		st, err := decideReserve(cur, br, req, fp, np, now)
		return boltDecision{st, cur, brRaw}, err
	}
	var res Result
	readOnly := false
	err = s.db.View(func(tx *bolt.Tx) error {
		d, err := decide(tx, s.now())
		if err == nil && (d.st.record != nil || d.st.breaker != nil || len(d.st.events) > 0) {
			return nil // it writes: the writer decides
		}
		res, readOnly = d.st.result, true
		return err
	})
	if readOnly || err != nil {
		return res, s.readErr(err)
	}
	return s.write(decide)
}

// writeKey decides on one key's record, and on its destination's breaker,
// inside the write transaction.
func (s *BoltStore) writeKey(ns, key string, decide func(cur *Record, br *Breaker, now time.Time) (step, error)) (Result, error) {
	return s.write(func(tx *bolt.Tx, now time.Time) (boltDecision, error) {
		cur, err := getRecord(tx, ns, key)
		if err != nil {
			return boltDecision{}, err
		}
		br, brRaw, err := s.breakerOf(tx, cur)
		if err != nil {
			return boltDecision{}, err
		}
		st, err := decide(cur, br, now)
		return boltDecision{st, cur, brRaw}, err
	})
}

// Complete implements Store.
func (s *BoltStore) Complete(_ context.Context, req CompleteRequest) (Result, error) {
	req, err := req.normalize()
	if err != nil {
		return Result{}, err
	}
	np := s.policies.Namespace(req.Namespace)
	return s.writeKey(req.Namespace, req.Key, func(cur *Record, br *Breaker, now time.Time) (step, error) {
		return decideComplete(cur, br, req, np, now)
	})
}

// Fail implements Store.
func (s *BoltStore) Fail(_ context.Context, req FailRequest) (Result, error) {
	req, err := req.normalize()
	if err != nil {
		return Result{}, err
	}
	np := s.policies.Namespace(req.Namespace)
	return s.writeKey(req.Namespace, req.Key, func(cur *Record, br *Breaker, now time.Time) (step, error) {
		var dp DestinationPolicy
		if br != nil {
			dp = s.policies.Destination(br.Destination)
		}
		return decideFail(cur, br, req, np, dp, now)
	})
}

func (s *BoltStore) breakerOf(tx *bolt.Tx, cur *Record) (*Breaker, []byte, error) {
	if cur == nil || cur.Destination == "" {
		return nil, nil, nil
	}
	return getBreaker(tx, cur.Destination)
}

// Resolve implements Store.
func (s *BoltStore) Resolve(_ context.Context, req ResolveRequest) (Result, error) {
	req, err := req.normalize()
	if err != nil {
		return Result{}, err
	}
	np := s.policies.Namespace(req.Namespace)
	return s.writeKey(req.Namespace, req.Key, func(cur *Record, _ *Breaker, now time.Time) (step, error) {
		return decideResolve(cur, req, np, now)
	})
}

// Lookup implements Store.
func (s *BoltStore) Lookup(_ context.Context, ns, key string) (Result, error) {
	key, err := checkIdentity(ns, key)
	if err != nil {
		return Result{}, err
	}
	var res Result
	err = s.db.View(func(tx *bolt.Tx) error {
		cur, err := getRecord(tx, ns, key)
		if err != nil {
			return err
		}
		res = Result{Namespace: ns, Key: key, Outcome: OutcomeAbsent}
		if cur != nil {
			res.Outcome, res.Record = OutcomeFound, cur
		}
		return nil
	})
	return res, s.readErr(err)
}

func (s *BoltStore) readErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return Errorf(EStoreUnavailable, "store is closed")
	}
	return err
}

// List implements Store. The cursor is the last bbolt key of the page.
func (s *BoltStore) List(_ context.Context, q ListQuery) (Page, error) {
	q, err := q.normalize()
	if err != nil {
		return Page{}, err
	}
	var after []byte
	if q.Cursor != "" {
		if after, err = base64.RawURLEncoding.DecodeString(q.Cursor); err != nil {
			return Page{}, invalid("cursor", "cursor", "cursor is not one this server returned")
		}
	}
	var page Page
	err = s.db.View(func(tx *bolt.Tx) error {
		// Where to walk: the state index, the lease index (reserved keys,
		// in lease order, filtered by namespace), or all keys.
		var prefix, nsPrefix []byte
		if q.Namespace != "" {
			nsPrefix = recordKey(q.Namespace, "")
		}
		bucket, skip := bucketKeys, 0
		switch {
		case stateIndexed(q.State):
			bucket, skip = bucketState, 1
			prefix = append([]byte{stateCodes[q.State]}, nsPrefix...)
		case q.State == StateReserved:
			bucket, skip = bucketLeases, 8
		default:
			prefix = nsPrefix
		}
		keys := tx.Bucket(bucketKeys)
		c := tx.Bucket(bucket).Cursor()
		var k, v, lastKey []byte
		if after != nil {
			if len(after) <= skip || bytes.IndexByte(after[skip:], 0) < 0 {
				return invalid("cursor", "cursor", "cursor is not one this server returned")
			}
			if !bytes.HasPrefix(after, prefix) {
				return invalid("cursor", "cursor", "cursor belongs to another listing")
			}
			k, v = c.Seek(after)
			if bytes.Equal(k, after) {
				k, v = c.Next()
			}
		} else {
			k, v = c.Seek(prefix)
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			rk := k[skip:]
			if skip > 0 {
				if !bytes.HasPrefix(rk, nsPrefix) {
					continue
				}
				if v = keys.Get(rk); v == nil {
					continue // an index entry without its record: never shown
				}
			}
			ns, key := splitRecordKey(rk)
			r, err := decodeRecord(ns, key, v)
			if err != nil {
				return err
			}
			if q.State != "" && r.State != q.State {
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
