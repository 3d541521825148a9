package catchup_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// passes counts the reads that begin a pass of the catch-up, so that a
// test asserting what a pass did not do waits for passes, not for wall
// time: each look of a destination's worker lists its parked keys once,
// by wait start (parked), each pass of the approval resumer reads each decided stage of
// each gated namespace (decided).
type passes struct {
	*bolt.Store
	parked, decided atomic.Int64
}

func (p *passes) ParkedByWait(ctx context.Context, q keystore.WaitQuery) ([]*keystore.Record, error) {
	if q.Until.IsZero() { // the worker's listing, not its read of the overdue keys
		p.parked.Add(1)
	}
	return p.Store.ParkedByWait(ctx, q)
}

func (p *passes) KeysAtStage(ctx context.Context, q keystore.StageQuery) ([]*keystore.Record, error) {
	p.decided.Add(1)
	return p.Store.KeysAtStage(ctx, q)
}

// awaitMore waits until count has grown by n from now.
func awaitMore(t *testing.T, what string, count *atomic.Int64, n int64) {
	t.Helper()
	want := count.Load() + n
	testwait.For(t, what, func() bool { return count.Load() >= want })
}
