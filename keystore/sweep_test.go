package keystore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The sweep runs its three passes in order, each batch after batch while
// the store says more may be due, going on from the cursor each batch
// answered; it adds up what each changed and keeps its longest
// transaction.
func TestSweepRunsEachPassUntilNothingIsDue(t *testing.T) {
	d := newMemDriver(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	batches := map[keystore.SweepPass]int{keystore.SweepLeases: 3, keystore.SweepRetention: 1, keystore.SweepEvents: 2}
	d.sweep = func(op keystore.SweepOp) keystore.SweepBatch {
		batches[op.Pass]--
		return keystore.SweepBatch{Changed: int(op.Pass) + 1, More: batches[op.Pass] > 0, Cursor: op.Cursor + "x",
			Took: time.Duration(len(op.Cursor)+1) * time.Millisecond}
	}
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		"crm": {OnLeaseExpiry: keystore.ExpireReclaim}, "mail": {}}}
	st, err := (&keystore.Operations{Driver: d, Policies: pol}).Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st != (keystore.SweepStats{LeasesExpired: 3, Expired: 2, Events: 6, LongestTx: 3 * time.Millisecond}) {
		t.Fatalf("stats %+v", st)
	}
	var passes []keystore.SweepPass
	var cursors []string
	for _, op := range d.sweeps {
		passes, cursors = append(passes, op.Pass), append(cursors, op.Cursor)
	}
	if !slices.Equal(passes, []keystore.SweepPass{0, 0, 0, 1, 2, 2}) || !slices.Equal(cursors, []string{"", "x", "xx", "", "", "x"}) {
		t.Fatalf("passes %v, cursors %q", passes, cursors)
	}
	if op := d.sweeps[0]; !slices.Equal(op.Skip, []string{"crm"}) {
		t.Fatalf("leases pass skips %v, want the reclaim namespace", op.Skip)
	}
	if op := d.sweeps[4]; op.Retention != keystore.EventRetention {
		t.Fatalf("events pass keeps %v", op.Retention)
	}
}

// What the sweep decides on a due key: a lease that ran out goes unknown
// (unless its namespace reclaims), a finished record past its retention is
// deleted, an open one is kept.
func TestSweepDecisions(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	past := now.Add(-time.Second)
	d := newMemDriver(now)
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"crm": {OnLeaseExpiry: keystore.ExpireReclaim}}}
	if _, err := (&keystore.Operations{Driver: d, Policies: pol}).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	leases, retention := d.sweeps[0].Decide, d.sweeps[1].Decide
	reserved := func(ns string) *keystore.Record {
		return &keystore.Record{Namespace: ns, Key: "k", State: keystore.StateReserved, Attempt: 1, LeaseExpiresAt: &past}
	}
	if st, del := leases(reserved("mail"), now); del || st.Record == nil || st.Record.State != keystore.StateUnknown || len(st.Events) != 1 {
		t.Errorf("a lease that ran out: %+v %v", st.Record, del)
	}
	if st, del := leases(reserved("crm"), now); del || st.Record != nil || len(st.Events) != 0 {
		t.Errorf("a reclaim namespace's lease: %+v %v", st.Record, del)
	}
	if st, del := leases(nil, now); del || st.Record != nil {
		t.Errorf("no record: %+v %v", st.Record, del)
	}
	for _, c := range []struct {
		state keystore.State
		at    time.Time
		gone  bool
	}{
		{keystore.StateCompleted, past, true},
		{keystore.StateFailed, now, true},
		{keystore.StateCompleted, now.Add(time.Millisecond), false},
		{keystore.StateUnknown, past, false},
	} {
		at := c.at
		r := &keystore.Record{Namespace: "mail", Key: "k", State: c.state, ExpiresAt: &at}
		if st, del := retention(r, now); del != c.gone || st.Record != nil {
			t.Errorf("%s, expires %v: deleted %v", c.state, c.at.Sub(now), del)
		}
	}
}
