package keystore

import (
	"context"
	"time"
)

// The sweep, written once for every store: it moves reservations whose
// lease ran out to unknown, deletes records past their retention and
// events past EventRetention. Each pass reads its store's time-ordered
// index from the oldest entry in short transactions (SweepDue), so it
// touches only what is due and never holds up live writes for long; what
// happens to each key is decided here.

// SweepPass is one kind of work of a sweep.
type SweepPass int

const (
	SweepLeases    SweepPass = iota // reservations whose lease ran out: DecideLeaseExpiry
	SweepRetention                  // records whose expires_at passed: DecideRetention
	SweepEvents                     // events at or before now - Retention
)

// SweepOp is one batch of a sweep pass, for a Driver to carry out.
type SweepOp struct {
	Pass SweepPass
	// Cursor is where the pass goes on from: the previous batch's
	// SweepBatch.Cursor ("": its oldest entry). A store that drops what it
	// went past (an entry of its own index) may answer none.
	Cursor string
	// Skip names namespaces whose due keys Decide leaves as they are
	// (SweepLeases: those that reclaim); a store may leave them unread.
	Skip []string
	// Decide decides one due key of SweepLeases or SweepRetention: a Step
	// to save, or delete to remove its record; an empty Step and false
	// leave it. Never called on a damaged record: the store notes it and
	// goes on past it, so one bad record never holds back the rest.
	Decide func(cur *Record, now time.Time) (st Step, delete bool)
	// Retention: SweepEvents deletes the events older than it.
	Retention time.Duration
}

// SweepBatch says what one batch of a sweep pass did.
type SweepBatch struct {
	Changed int           // keys saved or deleted, events deleted
	More    bool          // the pass may have more due: run another batch
	Cursor  string        // where the next batch goes on from
	Took    time.Duration // how long its transaction ran
}

// DecideRetention says whether the sweep deletes cur at now: a finished
// record whose retention ended. An open key is kept until a person or an
// attempt decides it.
func DecideRetention(cur *Record, now time.Time) bool {
	return cur != nil && cur.Finished() && cur.ExpiresAt != nil && !now.Before(*cur.ExpiresAt)
}

// Sweep implements Store: the activity chart's fold, then each pass
// batch by batch until nothing more is due or ctx ends.
func (o *Operations) Sweep(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	if err := o.Driver.FoldActivity(ctx); err != nil {
		return st, err
	}
	var reclaim []string
	for ns, p := range o.Policies.Namespaces {
		if p.OnLeaseExpiry == ExpireReclaim {
			reclaim = append(reclaim, ns)
		}
	}
	passes := []struct {
		op    SweepOp
		count *int
	}{
		{SweepOp{Pass: SweepLeases, Skip: reclaim, Decide: func(cur *Record, now time.Time) (Step, bool) {
			if cur == nil {
				return Step{}, false
			}
			step, _ := DecideLeaseExpiry(cur, o.Policies.Namespace(cur.Namespace), now)
			return step, false
		}}, &st.LeasesExpired},
		{SweepOp{Pass: SweepRetention, Decide: func(cur *Record, now time.Time) (Step, bool) {
			return Step{}, DecideRetention(cur, now)
		}}, &st.Expired},
		{SweepOp{Pass: SweepEvents, Retention: EventRetention}, &st.Events},
	}
	for _, p := range passes {
		for {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			b, err := o.Driver.SweepDue(ctx, p.op)
			st.LongestTx = max(st.LongestTx, b.Took)
			*p.count += b.Changed
			if err != nil {
				return st, err // nothing of this batch was saved
			}
			if !b.More {
				break
			}
			p.op.Cursor = b.Cursor
		}
	}
	return st, nil
}
