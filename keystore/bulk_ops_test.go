package keystore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// unknownKeys puts n unknown keys of ns into d, the first damaged ones
// marked (memDriver hands them to the decision as damaged).
func unknownKeys(d *memDriver, ns string, n, damaged int) {
	for i := range n {
		r := &keystore.Record{Namespace: ns, Key: fmt.Sprintf("evt_%04d", i), State: keystore.StateUnknown, Attempt: 1,
			UpdatedAt: d.now.Add(-time.Hour), History: []keystore.Transition{{At: d.now.Add(-time.Hour), Event: keystore.HistoryReserved, Attempt: 1}}}
		if i < damaged {
			r.Message = "damaged"
		}
		d.records[ns+"\x00"+r.Key] = r
	}
}

func bulkRequest(id string) keystore.BulkResolveRequest {
	return keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm"},
		Resolution: keystore.StateFailed, By: "ann", Note: "CRM incident", ID: id}
}

// The bulk loop, written once for every store: the selection read whole,
// then decided BulkBatch keys to a transaction, each key by
// DecideBulkResolve; a damaged record is counted and never stops the rest.
func TestResolveManyDecidesInBatches(t *testing.T) {
	ctx := context.Background()
	d := newMemDriver(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	unknownKeys(d, "crm", keystore.BulkBatch+2, 1)
	unknownKeys(d, "mail", 3, 0) // not selected
	o := &keystore.Operations{Driver: d}

	dry, err := o.ResolveMany(ctx, func() keystore.BulkResolveRequest { r := bulkRequest("b-00000001"); r.DryRun = true; return r }())
	if err != nil || dry.Matched != keystore.BulkBatch+2 || dry.Decided != keystore.BulkBatch+1 || dry.Skipped[keystore.SkipDamaged] != 1 || !dry.DryRun {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if len(d.bulks) != 0 || d.records["crm\x00evt_0001"].State != keystore.StateUnknown {
		t.Fatalf("a dry run claimed its id or wrote: %v %s", d.bulks, d.records["crm\x00evt_0001"].State)
	}
	for _, b := range d.batches {
		if !b.DryRun {
			t.Fatalf("a dry run's batch is not dry: %+v", b)
		}
	}

	d.batches = nil
	res, err := o.ResolveMany(ctx, bulkRequest("b-00000001"))
	if err != nil || res.Matched != keystore.BulkBatch+2 || res.Decided != keystore.BulkBatch+1 || res.Skipped[keystore.SkipDamaged] != 1 {
		t.Fatalf("bulk: %+v %v", res, err)
	}
	if len(d.batches) != 2 || len(d.batches[0].Keys) != keystore.BulkBatch || len(d.batches[1].Keys) != 2 || d.batches[0].Name != "resolve-bulk" {
		t.Fatalf("batches of %d keys, want %d then 2", batchSizes(d.batches), keystore.BulkBatch)
	}
	if d.bulks["b-00000001"] == nil || d.records["crm\x00evt_0001"].State != keystore.StateFailed || d.records["mail\x00evt_0001"].State != keystore.StateUnknown {
		t.Fatalf("the id is not kept, or the wrong keys were decided")
	}

	again, err := o.ResolveMany(ctx, bulkRequest("b-00000001"))
	if err != nil || again.Decided != 0 || again.Skipped[keystore.SkipDecided] != keystore.BulkBatch+1 {
		t.Fatalf("a repeat: %+v %v", again, err)
	}
	req := bulkRequest("b-00000001")
	req.Note = "another reason"
	if _, err := o.ResolveMany(ctx, req); err == nil {
		t.Fatal("the same id with other content was run")
	}
}

func batchSizes(bs []keystore.KeysOp) []int {
	var n []int
	for _, b := range bs {
		n = append(n, len(b.Keys))
	}
	return n
}

// A store may decide a batch again after a lost race; only the last
// decision counts, so the answer is what was saved.
func TestResolveManyCountsABatchDecidedTwiceOnce(t *testing.T) {
	d := newMemDriver(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	d.retries = 2
	unknownKeys(d, "crm", 5, 0)
	res, err := (&keystore.Operations{Driver: d}).ResolveMany(context.Background(), bulkRequest("b-00000002"))
	if err != nil || res.Matched != 5 || res.Decided != 5 || len(res.Skipped) != 0 {
		t.Fatalf("bulk: %+v %v", res, err)
	}
}

// When ctx ends between batches, the batches done stay decided and the
// answer says how many.
func TestResolveManyStopsBetweenBatches(t *testing.T) {
	d := newMemDriver(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	unknownKeys(d, "crm", keystore.BulkBatch+1, 0)
	ctx, cancel := context.WithCancel(context.Background())
	o := &keystore.Operations{Driver: &cancelAfterBatch{memDriver: d, cancel: cancel}}
	res, err := o.ResolveMany(ctx, bulkRequest("b-00000003"))
	if err == nil || res.Matched != keystore.BulkBatch+1 || res.Decided != keystore.BulkBatch || len(d.batches) != 1 {
		t.Fatalf("bulk: %+v %v after %d batches", res, err, len(d.batches))
	}
}

type cancelAfterBatch struct {
	*memDriver
	cancel func()
}

func (c *cancelAfterBatch) DecideKeys(ctx context.Context, op keystore.KeysOp) error {
	defer c.cancel()
	return c.memDriver.DecideKeys(ctx, op)
}
