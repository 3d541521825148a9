package keystore_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// memDriver is a Driver over two maps: it loads what an Op names, decides
// and saves the Step, as the stores do inside their transactions.
type memDriver struct {
	now      time.Time
	records  map[string]*keystore.Record
	breakers map[string]*keystore.Breaker
	ops      []keystore.Op
	batches  []keystore.KeysOp  // DecideKeys, in order
	sweeps   []keystore.SweepOp // SweepDue, in order
	// sweep answers each SweepDue (nil: nothing due).
	sweep func(op keystore.SweepOp) keystore.SweepBatch
	// retries: DecideKeys decides each batch this many more times, as a
	// store does after a lost race.
	retries int
	bulks   map[string]*keystore.BulkAction
}

func newMemDriver(now time.Time) *memDriver {
	return &memDriver{now: now, records: map[string]*keystore.Record{}, breakers: map[string]*keystore.Breaker{}}
}

func (m *memDriver) DecideKey(_ context.Context, op keystore.Op) (keystore.Result, error) {
	m.ops = append(m.ops, op)
	cur := m.records[op.Namespace+"\x00"+op.Key]
	var br *keystore.Breaker
	if dest := op.BreakerOf(cur); dest != "" {
		br, _ = m.breaker(dest)
	}
	st, err := op.Decide(cur, br, m.now)
	if err != nil {
		return keystore.Result{}, err
	}
	if st.Record != nil {
		m.records[op.Namespace+"\x00"+op.Key] = st.Record
	}
	if st.Breaker != nil {
		m.breakers[st.Breaker.Destination] = st.Breaker
	}
	return st.Result, nil
}

func (m *memDriver) DecideBreaker(_ context.Context, op keystore.BreakerOp) error {
	br, exists := m.breaker(op.Destination)
	st, err := op.Decide(br, exists, m.now)
	if err == nil && len(st.Events) > 0 {
		m.breakers[op.Destination] = st.Breaker
	}
	return err
}

// Select answers the keys in map order, two to a page, the filter
// matched on each (a store's Select reads its indexes).
func (m *memDriver) Select(_ context.Context, f keystore.Filter, cursor string, _ int) (keystore.Page, error) {
	var keys []string
	for k, r := range m.records {
		if f.Match(r) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page keystore.Page
	i := 0
	if cursor != "" {
		i, _ = strconv.Atoi(cursor)
	}
	for ; i < len(keys) && len(page.Items) < 2; i++ {
		page.Items = append(page.Items, m.records[keys[i]])
	}
	if i < len(keys) {
		page.NextCursor = strconv.Itoa(i)
	}
	return page, nil
}

func (m *memDriver) DecideKeys(_ context.Context, op keystore.KeysOp) error {
	m.batches = append(m.batches, op)
	got := make([]keystore.Loaded, len(op.Keys))
	for i, ref := range op.Keys {
		got[i] = keystore.Loaded{KeyRef: ref, Record: m.records[ref.Namespace+"\x00"+ref.Key]}
		if got[i].Record != nil && got[i].Record.Message == "damaged" {
			got[i].Record, got[i].Damaged = nil, true
		}
	}
	var steps []keystore.Step
	for range m.retries + 1 {
		var err error
		if steps, err = op.Decide(got, m.now); err != nil {
			return err
		}
	}
	if op.DryRun {
		return nil
	}
	for _, st := range steps {
		if st.Record != nil {
			m.records[st.Record.Namespace+"\x00"+st.Record.Key] = st.Record
		}
	}
	return nil
}

func (m *memDriver) ClaimBulk(_ context.Context, id string, decide func(*keystore.BulkAction, time.Time) (*keystore.BulkAction, error)) error {
	next, err := decide(m.bulks[id], m.now)
	if next != nil {
		if m.bulks == nil {
			m.bulks = map[string]*keystore.BulkAction{}
		}
		m.bulks[id] = next
	}
	return err
}

func (m *memDriver) SweepDue(_ context.Context, op keystore.SweepOp) (keystore.SweepBatch, error) {
	m.sweeps = append(m.sweeps, op)
	if m.sweep == nil {
		return keystore.SweepBatch{}, nil
	}
	return m.sweep(op), nil
}

func (m *memDriver) FoldActivity(context.Context) error { return nil }

func (m *memDriver) breaker(dest string) (*keystore.Breaker, bool) {
	if b, ok := m.breakers[dest]; ok {
		return b.Clone(), true
	}
	return keystore.NewBreaker(dest), false
}

// Each operation names the breaker its decision reads: reserve the
// request's destination, decisions that move a breaker (complete, fail,
// a resume's claim and answer) the record's, a person's decisions and
// the checks none; only reserve may be answered from a read.
func TestEachOperationReadsTheBreakerItsDecisionUses(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	const ns, key = "crm-contacts", "evt_1"
	cases := []struct {
		name      string
		call      func(o *keystore.Operations) error
		rule      keystore.BreakerRule
		readFirst bool
	}{
		{"reserve", func(o *keystore.Operations) error {
			_, err := o.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "hubspot"})
			return err
		}, keystore.RequestBreaker, true},
		{"complete", func(o *keystore.Operations) error {
			_, err := o.Complete(ctx, keystore.CompleteRequest{Namespace: ns, Key: key, Token: "t"})
			return err
		}, keystore.RecordBreaker, false},
		{"fail", func(o *keystore.Operations) error {
			_, err := o.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: "t", Reason: keystore.ReasonDestinationFailed})
			return err
		}, keystore.RecordBreaker, false},
		{"resolve", func(o *keystore.Operations) error {
			_, err := o.Resolve(ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateCompleted, By: "ana", Note: "done by hand"})
			return err
		}, keystore.NoBreaker, false},
		{"acknowledge", func(o *keystore.Operations) error {
			_, err := o.Acknowledge(ctx, keystore.AckRequest{Namespace: ns, Key: key, Event: keystore.HistoryAcknowledged, By: "ana"})
			return err
		}, keystore.NoBreaker, false},
		{"approve", func(o *keystore.Operations) error {
			_, err := o.Approve(ctx, keystore.ApprovalRequest{Namespace: ns, Key: key, By: "ana"})
			return err
		}, keystore.NoBreaker, false},
		{"reject", func(o *keystore.Operations) error {
			_, err := o.Reject(ctx, keystore.ApprovalRequest{Namespace: ns, Key: key, By: "ana", Note: "not this one"})
			return err
		}, keystore.NoBreaker, false},
		{"claim resume", func(o *keystore.Operations) error {
			_, _, err := o.ClaimResume(ctx, ns, key, time.Minute)
			return err
		}, keystore.RecordBreaker, false},
		{"resume answered", func(o *keystore.Operations) error {
			_, err := o.ResumeAnswered(ctx, ns, key, now, keystore.ResumeAccepted, "")
			return err
		}, keystore.RecordBreaker, false},
		{"parked overdue", func(o *keystore.Operations) error {
			_, err := o.ParkedOverdue(ctx, ns, key, now, time.Hour)
			return err
		}, keystore.NoBreaker, false},
		{"claim check", func(o *keystore.Operations) error {
			_, _, err := o.ClaimCheck(ctx, ns, key, 1, time.Minute, 3)
			return err
		}, keystore.NoBreaker, false},
		{"check answered", func(o *keystore.Operations) error {
			_, _, err := o.CheckAnswered(ctx, ns, key, 1, keystore.CheckAnswer{})
			return err
		}, keystore.NoBreaker, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newMemDriver(now)
			o := &keystore.Operations{Driver: d}
			_ = c.call(o) // most find no key: the answer is not what is tested
			if len(d.ops) != 1 {
				t.Fatalf("%d decisions, want 1", len(d.ops))
			}
			op := d.ops[0]
			if op.Name != c.name || op.Breaker != c.rule || op.ReadFirst != c.readFirst || op.Namespace != ns || op.Key != key {
				t.Errorf("op %q breaker %v read first %v on %s/%s; want %q %v %v", op.Name, op.Breaker, op.ReadFirst, op.Namespace, op.Key, c.name, c.rule, c.readFirst)
			}
		})
	}
}

// A copy of an event whose key is done is answered duplicate_event and
// counted in the hour it was decided, without a write.
func TestDuplicateReservesAreCounted(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC)
	d := newMemDriver(now)
	var dups keystore.DuplicateTally
	o := &keystore.Operations{Driver: d, Duplicates: &dups}
	req := keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1"}
	r, err := o.Reserve(ctx, req)
	if err != nil || r.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("reserve: %v %s", err, r.Outcome)
	}
	if _, err := o.Complete(ctx, keystore.CompleteRequest{Namespace: "crm-contacts", Key: "evt_1", Token: r.Token}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r, err := o.Reserve(ctx, req); err != nil || r.Outcome != keystore.OutcomeDuplicate {
			t.Fatalf("copy: %v %s", err, r.Outcome)
		}
	}
	got := dups.Take()
	if len(got) != 1 || got[now.Truncate(time.Hour).Unix()] != 2 {
		t.Errorf("tally %v, want 2 in the hour of %s", got, now)
	}
}

// Ending a maintenance window of a destination that has no breaker is not
// found; holding it, then ending the hold, answers the breaker as left.
func TestBreakerOperations(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	o := &keystore.Operations{Driver: newMemDriver(now)}
	if _, err := o.EndHold(ctx, "hubspot", "ana", "done"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("end hold without a breaker: %v", err)
	}
	if _, err := o.HoldDestination(ctx, "", "ana", "upgrade", now.Add(time.Hour)); errs.CodeOf(err) != errs.InvalidRequest {
		t.Fatalf("hold without a destination: %v", err)
	}
	b, err := o.HoldDestination(ctx, "hubspot", "ana", "upgrade", now.Add(time.Hour))
	if err != nil || b.State != keystore.BreakerOpen || b.Maintenance == nil {
		t.Fatalf("hold: %+v %v", b, err)
	}
	b, err = o.EndHold(ctx, "hubspot", "ana", "finished early")
	if err != nil || b.Maintenance != nil || b.State != keystore.BreakerHalfOpen {
		t.Fatalf("end hold: %+v %v", b, err)
	}
}
