package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// The resume pace of each destination (keystore/pace.go) lives in the
// file, in bucket pace: after a restart, or a store reopened in the same
// process, the slots of the resumed executions still in flight stay held
// (each slot's key tells: keystore.ResumeInFlight), and the calls of the
// last window still count. Its writes are ordinary writes of the group
// commit, decided on the writer's goroutine, so two runners on one store
// take turns in one pace.
var bucketPace = []byte("pace") // destination -> keystore.Pace (encodePace)

// paceAhead: a bbolt file's clock is its process's, the one the runner
// waits on, so a turn may be given a little ahead and several share one
// commit (a commit per turn would cap the pace at one turn per fsync).
const paceAhead = 25 * time.Millisecond

// TakeResumeTurn implements keystore.ParkStore.
func (s *Store) TakeResumeTurn(_ context.Context, req keystore.TurnRequest) (t keystore.Turn, ok bool, wait time.Duration, err error) {
	if err := keystore.CheckNamespace("destination", req.Destination); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	dp := s.policies.Destination(req.Destination)
	decide := func(tx *bbolt.Tx, p keystore.Pace, now time.Time) (keystore.Pace, bool) {
		var next keystore.Pace
		next, t, ok, wait = keystore.DecideResumeTurn(p, req, dp, now, func(sl keystore.Slot) bool {
			rec, err := getRecord(tx, sl.Namespace, sl.Key)
			return err != nil || keystore.ResumeInFlight(rec, now) // a damaged record holds its slot until Until
		})
		return next, ok
	}
	// A look in a read transaction first: a refused turn costs no commit
	// (a waiting call asks again and again). A turn it would give is
	// decided again in the writer's transaction, which alone writes.
	if err := s.view(func(tx *bbolt.Tx) error {
		decide(tx, s.readPace(tx, req.Destination), s.now())
		return nil
	}); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	if !ok {
		return keystore.Turn{}, false, wait, nil
	}
	if err := s.pace(req.Destination, decide); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	return t, ok, wait, nil
}

// EndResumeCall implements keystore.ParkStore. The end is read off the
// clock when the op is decided, not the group's time, which may be from
// before the call returned.
func (s *Store) EndResumeCall(_ context.Context, t keystore.Turn) error {
	defer s.paceWake.Notify()
	return s.pace(t.Destination, func(_ *bbolt.Tx, p keystore.Pace, _ time.Time) (keystore.Pace, bool) {
		return keystore.EndCall(p, t, s.clock().UTC().Truncate(time.Millisecond))
	})
}

// ReleaseResumeTurn implements keystore.ParkStore.
func (s *Store) ReleaseResumeTurn(_ context.Context, t keystore.Turn) error {
	defer s.paceWake.Notify()
	return s.pace(t.Destination, func(_ *bbolt.Tx, p keystore.Pace, _ time.Time) (keystore.Pace, bool) {
		return keystore.ReleaseTurn(p, t, s.clock().UTC().Truncate(time.Millisecond))
	})
}

// PaceAhead implements keystore.ParkStore.
func (s *Store) PaceAhead() time.Duration { return paceAhead }

// PaceFreed implements keystore.ParkStore.
func (s *Store) PaceFreed() <-chan struct{} { return s.paceWake.C() }

// pace reads dest's pace in the writer's transaction, lets decide compute
// the next one and writes it when decide says so. A pace that cannot be
// read (damaged by hand) starts empty, said once in the log: a destination
// whose catch-up never ends is worse than one window's calls forgotten.
func (s *Store) pace(dest string, decide func(tx *bbolt.Tx, p keystore.Pace, now time.Time) (keystore.Pace, bool)) error {
	_, err := s.write(func(tx *bbolt.Tx, now time.Time) (boltDecision, error) {
		next, write := decide(tx, s.readPace(tx, dest), now)
		if !write {
			return boltDecision{}, nil
		}
		v := encodePace(next)
		return boltDecision{also: func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketPace)
			if err != nil {
				return err
			}
			return b.Put([]byte(dest), v)
		}}, nil
	})
	return err
}

// readPace is dest's pace in tx (empty: none yet, or one that cannot be
// read, said in the log).
func (s *Store) readPace(tx *bbolt.Tx, dest string) keystore.Pace {
	var p keystore.Pace
	b := tx.Bucket(bucketPace)
	if b == nil {
		return p
	}
	if v := b.Get([]byte(dest)); v != nil {
		var err error
		if p, err = decodePace(v); err != nil {
			s.log.Error("store: the resume pace of a destination could not be read; it starts anew", "path", s.path, "destination", dest, "err", err)
			return keystore.Pace{}
		}
	}
	return p
}

// paceFormat is the first byte of an encoded pace. The pace is read and
// written at each turn, with up to catch_up_rate calls in it: a compact
// fixed layout, not JSON (whose decoding was most of a fast catch-up's
// time).
const paceFormat = 1

// encodePace: format, last (unix ns), the slots (until, namespace, key)
// and the calls (at, end, slot); times as unix ns, 0 for zero.
func encodePace(p keystore.Pace) []byte {
	b := make([]byte, 0, 1+8+4+len(p.Slots)*24+4+len(p.Calls)*20)
	b = append(b, paceFormat)
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(p.Last)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(p.Slots)))
	for _, sl := range p.Slots {
		b = binary.BigEndian.AppendUint64(b, uint64(unixNano(sl.Until)))
		b = appendString(b, sl.Namespace)
		b = appendString(b, sl.Key)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(p.Calls)))
	for _, c := range p.Calls {
		b = binary.BigEndian.AppendUint64(b, uint64(unixNano(c.At)))
		b = binary.BigEndian.AppendUint64(b, uint64(unixNano(c.End)))
		b = binary.BigEndian.AppendUint32(b, uint32(c.Slot))
	}
	return b
}

var errPaceDamaged = errors.New("the pace is damaged")

func decodePace(v []byte) (keystore.Pace, error) {
	var p keystore.Pace
	if len(v) < 1 || v[0] != paceFormat {
		return p, errPaceDamaged
	}
	r := paceReader{b: v[1:]}
	p.Last = fromUnixNano(int64(r.u64()))
	p.Slots = make([]keystore.Slot, r.count(16))
	for i := range p.Slots {
		p.Slots[i] = keystore.Slot{Until: fromUnixNano(int64(r.u64())), Namespace: r.str(), Key: r.str()}
	}
	p.Calls = make([]keystore.Call, r.count(20))
	for i := range p.Calls {
		p.Calls[i] = keystore.Call{At: fromUnixNano(int64(r.u64())), End: fromUnixNano(int64(r.u64())), Slot: int(int32(r.u32()))}
	}
	if r.bad || len(r.b) != 0 {
		return keystore.Pace{}, errPaceDamaged
	}
	return p, nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func appendString(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// paceReader reads an encoded pace; bad is set at the first short read.
type paceReader struct {
	b   []byte
	bad bool
}

func (r *paceReader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return make([]byte, max(n, 0))
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *paceReader) u64() uint64 { return binary.BigEndian.Uint64(r.take(8)) }
func (r *paceReader) u32() uint32 { return binary.BigEndian.Uint32(r.take(4)) }
func (r *paceReader) str() string { return string(r.take(int(r.u32()))) }

// count reads a count of entries of at least size bytes each, refusing
// one the rest of the value cannot hold.
func (r *paceReader) count(size int) int {
	n := int(r.u32())
	if r.bad || n*size > len(r.b) {
		r.bad = true
		return 0
	}
	return n
}
