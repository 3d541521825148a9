// Package outboxtest is the conformance suite of notify.Outbox: every
// outbox (notify/bolt, notify/postgres, also through PgBouncer) runs it,
// so notify can rely on one behaviour whichever stores its notifications.
package outboxtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/notify"
)

// Open returns an empty outbox of its own for one test.
type Open func(t *testing.T) notify.Outbox

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// rec is a new failure notification created at at (its ID sorts by it).
func rec(at time.Time, n int, group string) *notify.Record {
	return &notify.Record{
		Header: notify.Header{ID: fmt.Sprintf("%s%08x", notify.IDPrefix(at), n), Kind: notify.KindWorkflowFailed,
			Status: notify.StatusPending, Group: group, Count: 1, FirstAt: at, LastAt: at, CreatedAt: at, Owner: "U0OWNER"},
		Delivery: notify.Delivery{DueAt: at},
		Failure:  notify.Failure{WorkflowID: "W1", ExecutionID: fmt.Sprint(n)},
	}
}

func keyRec(at time.Time, n int, ns, key string, attempt int) *notify.Record {
	r := rec(at, n, "")
	r.Kind, r.KeyPayload = notify.KindKeyUnknown, notify.KeyPayload{Namespace: ns, Key: key, KeyAttempt: attempt}
	return r
}

func add(t *testing.T, o notify.Outbox, adds ...notify.Addition) []notify.Added {
	t.Helper()
	res, err := o.Add(context.Background(), adds, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(adds) {
		t.Fatalf("Add returned %d results for %d additions", len(res), len(adds))
	}
	return res
}

func get(t *testing.T, o notify.Outbox, id string) *notify.Record {
	t.Helper()
	r, err := o.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Run runs every case, each on a fresh outbox.
func Run(t *testing.T, open Open) {
	ctx := context.Background()
	t.Run("add, get and list, newest first", func(t *testing.T) {
		o := open(t)
		for i := range 5 {
			add(t, o, notify.Addition{Record: rec(t0.Add(time.Duration(i)*time.Second), i, "")})
		}
		r := get(t, o, rec(t0, 0, "").ID)
		if r == nil || r.ExecutionID != "0" || r.Owner != "U0OWNER" || !r.CreatedAt.Equal(t0) {
			t.Fatalf("Get: %+v", r)
		}
		if r := get(t, o, "n_00000000000000000000dead"); r != nil {
			t.Fatalf("Get of a missing id: %+v", r)
		}
		p, err := o.List(ctx, notify.ListQuery{Limit: 2})
		if err != nil || len(p.Items) != 2 || p.Items[0].ExecutionID != "4" || p.NextCursor != p.Items[1].ID {
			t.Fatalf("first page: %+v %v", p, err)
		}
		p, err = o.List(ctx, notify.ListQuery{Limit: 2, Cursor: p.NextCursor})
		if err != nil || len(p.Items) != 2 || p.Items[0].ExecutionID != "2" {
			t.Fatalf("second page: %+v %v", p, err)
		}
		p, err = o.List(ctx, notify.ListQuery{Limit: 2, Cursor: p.NextCursor})
		if err != nil || len(p.Items) != 1 || p.NextCursor != "" {
			t.Fatalf("last page: %+v %v", p, err)
		}
		if _, err := o.Update(ctx, rec(t0.Add(3*time.Second), 3, "").ID, func(r *notify.Record) { r.Status = notify.StatusDead }); err != nil {
			t.Fatal(err)
		}
		p, err = o.List(ctx, notify.ListQuery{Limit: 50, Status: notify.StatusDead})
		if err != nil || len(p.Items) != 1 || p.Items[0].ExecutionID != "3" {
			t.Fatalf("dead only: %+v %v", p, err)
		}
	})

	t.Run("a group joins its head inside the window, and a new group starts after it or after a dead head", func(t *testing.T) {
		o := open(t)
		w := 5 * time.Minute
		first := add(t, o, notify.Addition{Record: rec(t0, 1, "g1"), Window: w})[0]
		second := add(t, o, notify.Addition{Record: rec(t0.Add(time.Minute), 2, "g1"), Window: w})[0]
		if first.Joined || !second.Joined || second.Record.ID != first.Record.ID || second.Record.Count != 2 {
			t.Fatalf("join: %+v then %+v", first, second)
		}
		if r := get(t, o, first.Record.ID); r.Count != 2 || !r.LastAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("head after the join: count %d last %s", r.Count, r.LastAt)
		}
		late := add(t, o, notify.Addition{Record: rec(t0.Add(6*time.Minute), 3, "g1"), Window: w})[0]
		if late.Joined {
			t.Fatal("joined a closed group")
		}
		if _, err := o.Update(ctx, late.Record.ID, func(r *notify.Record) { r.Status, r.DueAt = notify.StatusDead, time.Time{} }); err != nil {
			t.Fatal(err)
		}
		after := add(t, o, notify.Addition{Record: rec(t0.Add(7*time.Minute), 4, "g1"), Window: w})[0]
		if after.Joined {
			t.Fatal("joined a dead head: the failure would never be shown")
		}
		if again := add(t, o, notify.Addition{Record: rec(t0.Add(8*time.Minute), 5, "g1"), Window: w})[0]; !again.Joined || again.Record.ID != after.Record.ID {
			t.Fatalf("the new group: %+v", again)
		}
	})

	t.Run("once-keys and the event cursor go in one transaction", func(t *testing.T) {
		o := open(t)
		if c, err := o.EventCursor(ctx); err != nil || c != 0 {
			t.Fatalf("cursor of a new outbox: %d %v", c, err)
		}
		cur := uint64(7)
		res, err := o.Add(ctx, []notify.Addition{{Record: rec(t0, 1, ""), Once: "evt\x001"}, {Record: rec(t0, 2, ""), Once: "evt\x001"}}, &cur)
		if err != nil || res[0].Skipped || !res[1].Skipped {
			t.Fatalf("once: %+v %v", res, err)
		}
		if c, err := o.EventCursor(ctx); err != nil || c != 7 {
			t.Fatalf("cursor %d %v", c, err)
		}
		cur = 9
		if res, err := o.Add(ctx, []notify.Addition{{Record: rec(t0, 3, ""), Once: "evt\x001"}}, &cur); err != nil || !res[0].Skipped {
			t.Fatalf("the same once-key later: %+v %v", res, err)
		}
		if c, _ := o.EventCursor(ctx); c != 9 {
			t.Fatalf("cursor %d, want 9", c)
		}
		if _, err := o.Add(ctx, nil, &cur); err != nil {
			t.Fatalf("a batch of events that make no notification: %v", err)
		}
	})

	t.Run("due, earliest first; updates move the schedule", func(t *testing.T) {
		o := open(t)
		for i, d := range []time.Duration{3, 1, 2, 10} {
			r := rec(t0, i, "")
			r.DueAt = t0.Add(d * time.Minute)
			add(t, o, notify.Addition{Record: r})
		}
		due, err := o.Due(ctx, t0.Add(5*time.Minute), 50)
		if err != nil || len(due) != 3 || due[0].ExecutionID != "1" || due[1].ExecutionID != "2" || due[2].ExecutionID != "0" {
			t.Fatalf("due: %v %v", ids(due), err)
		}
		if n, err := o.Waiting(ctx); err != nil || n != 4 {
			t.Fatalf("waiting %d %v", n, err)
		}
		up, err := o.Update(ctx, due[0].ID, func(r *notify.Record) { r.DueAt = time.Time{}; r.Status = notify.StatusDelivered })
		if err != nil || up == nil || up.Status != notify.StatusDelivered {
			t.Fatalf("update: %+v %v", up, err)
		}
		if _, err := o.Update(ctx, due[1].ID, func(r *notify.Record) { r.DueAt = t0.Add(20 * time.Minute) }); err != nil {
			t.Fatal(err)
		}
		due, _ = o.Due(ctx, t0.Add(5*time.Minute), 50)
		if len(due) != 1 || due[0].ExecutionID != "0" {
			t.Fatalf("due after the updates: %v", ids(due))
		}
		if n, _ := o.Waiting(ctx); n != 3 {
			t.Fatalf("waiting %d, want 3", n)
		}
		if r, err := o.Update(ctx, "n_00000000000000000000dead", func(*notify.Record) { t.Error("fn ran for a missing id") }); r != nil || err != nil {
			t.Fatalf("update of a missing id: %+v %v", r, err)
		}
	})

	t.Run("escalate takes each due step once, with its message", func(t *testing.T) {
		o := open(t)
		for i := range 3 {
			r := rec(t0, i, "")
			at := t0.Add(time.Duration(10+i*10) * time.Minute)
			r.EscalateAt = &at
			add(t, o, notify.Addition{Record: r})
		}
		now := t0.Add(25 * time.Minute)
		if due, err := o.Escalating(ctx, now, 50); err != nil || len(due) != 2 {
			t.Fatalf("escalating: %v %v", ids(due), err)
		}
		step := func(r *notify.Record) *notify.Record {
			r.EscalateAt, r.EscalationStep = nil, r.EscalationStep+1
			e := rec(now, 0x100+int(r.ExecutionID[0]), "") // one per notification
			e.Kind, e.EscalationOf = notify.KindEscalation, r.ID
			r.Escalations = append(r.Escalations, e.ID)
			return e
		}
		if n, err := o.Escalate(ctx, now, 50, step); err != nil || n != 2 {
			t.Fatalf("escalate: %d %v", n, err)
		}
		if n, err := o.Escalate(ctx, now, 50, step); err != nil || n != 0 {
			t.Fatalf("a second pass took a step again: %d %v", n, err)
		}
		r := get(t, o, rec(t0, 0, "").ID)
		if r.EscalationStep != 1 || r.EscalateAt != nil || len(r.Escalations) != 1 {
			t.Fatalf("escalated: %+v", r.Escalation)
		}
		if e := get(t, o, r.Escalations[0]); e == nil || e.EscalationOf != r.ID {
			t.Fatalf("the escalation message: %+v", e)
		}
	})

	t.Run("notifications about a key, newest first", func(t *testing.T) {
		o := open(t)
		add(t, o, notify.Addition{Record: keyRec(t0, 1, "ns", "k1", 1)})
		add(t, o, notify.Addition{Record: keyRec(t0.Add(time.Second), 2, "ns", "k2", 1)})
		add(t, o, notify.Addition{Record: keyRec(t0.Add(2*time.Second), 3, "ns", "k1", 2)})
		add(t, o, notify.Addition{Record: keyRec(t0.Add(3*time.Second), 4, "ns2", "k1", 1)})
		got, err := o.AboutKey(ctx, "ns", "k1", 10)
		if err != nil || len(got) != 2 || got[0].KeyAttempt != 2 || got[1].KeyAttempt != 1 {
			t.Fatalf("about ns/k1: %v %v", ids(got), err)
		}
		if got, _ := o.AboutKey(ctx, "ns", "k", 10); len(got) != 0 {
			t.Fatalf("about ns/k (a prefix of k1): %v", ids(got))
		}
	})

	t.Run("outage messages by destination, newest first, with every field of the outage and of a parked key", func(t *testing.T) {
		o := open(t)
		outage := func(at time.Time, n int, dest string) *notify.Record {
			r := rec(at, n, "")
			r.Kind, r.Breaker = notify.KindBreakerOpened, notify.Breaker{Destination: dest, OutageSeq: uint64(n)}
			return r
		}
		first, second := outage(t0, 1, "hubspot"), outage(t0.Add(2*time.Second), 3, "hubspot")
		add(t, o, notify.Addition{Record: first}, notify.Addition{Record: outage(t0.Add(time.Second), 2, "hubspot-eu")})
		// A key whose namespace is empty cannot exist; a key named like the
		// destination in a namespace is not an outage.
		add(t, o, notify.Addition{Record: second}, notify.Addition{Record: keyRec(t0.Add(3*time.Second), 4, "ns", "hubspot", 1)})
		got, err := o.AboutDestination(ctx, "hubspot", 10)
		if err != nil || len(got) != 2 || got[0].ID != second.ID || got[1].ID != first.ID {
			t.Fatalf("about hubspot: %v %v", ids(got), err)
		}
		closed, caught := t0.Add(time.Minute), t0.Add(2*time.Minute)
		if _, err := o.Update(ctx, second.ID, func(r *notify.Record) {
			r.Parked, r.ParkedLost, r.ClosedAt, r.ResetBy, r.CaughtUpAt, r.OutageSeq = 37, 2, &closed, "alice", &caught, 9
		}); err != nil {
			t.Fatal(err)
		}
		got, _ = o.AboutDestination(ctx, "hubspot", 1)
		if b := got[0].Breaker; len(got) != 1 || b.Parked != 37 || b.ParkedLost != 2 || !b.ClosedAt.Equal(closed) ||
			b.ResetBy != "alice" || !b.CaughtUpAt.Equal(caught) || b.OutageSeq != 9 {
			t.Fatalf("outage read back: %+v", got[0].Breaker)
		}
		lost := keyRec(t0, 5, "ns", "k9", 2)
		parked := t0.Add(-time.Hour)
		lost.Kind, lost.Destination = notify.KindParkedLost, "hubspot"
		lost.ParkedKey = notify.ParkedKey{ParkedAt: &parked, WaitingExecution: "1005", ExecutionsURL: "https://n8n.example.org/executions"}
		add(t, o, notify.Addition{Record: lost})
		if r := get(t, o, lost.ID); r.ParkedKey.WaitingExecution != "1005" || !r.ParkedAt.Equal(parked) ||
			r.ExecutionsURL != lost.ExecutionsURL || r.Destination != "hubspot" || r.KeyAttempt != 2 {
			t.Fatalf("parked key read back: %+v %+v", r.ParkedKey, r.KeyPayload)
		}
		if got, _ := o.AboutKey(ctx, "ns", "k9", 10); len(got) != 0 {
			t.Fatalf("a parked key's message is not a stuck key's: %v", ids(got))
		}
	})

	t.Run("purge drops what is finished and old, keeps what is not", func(t *testing.T) {
		o := open(t)
		old, recent := rec(t0, 1, "g"), rec(t0.Add(40*24*time.Hour), 2, "")
		waiting := rec(t0, 3, "")
		for _, r := range []*notify.Record{old, recent} {
			d := r.CreatedAt
			r.Status, r.DueAt, r.DeliveredAt = notify.StatusDelivered, time.Time{}, &d
		}
		add(t, o, notify.Addition{Record: old, Window: time.Minute}, notify.Addition{Record: recent}, notify.Addition{Record: waiting})
		now := t0.Add(41 * 24 * time.Hour)
		n, err := o.Purge(ctx, now.Add(-30*24*time.Hour), now, 100)
		if err != nil || n != 1 {
			t.Fatalf("purged %d %v, want 1", n, err)
		}
		if get(t, o, old.ID) != nil || get(t, o, recent.ID) == nil || get(t, o, waiting.ID) == nil {
			t.Fatal("purged the wrong notifications")
		}
		if res := add(t, o, notify.Addition{Record: rec(now, 4, "g"), Window: time.Minute}); res[0].Joined {
			t.Fatal("joined the group of a purged head")
		}
	})

	t.Run("a group's keys are kept, listed, settled once and purged with it", func(t *testing.T) { groupMembers(t, open) })

	t.Run("Slack users are cached by e-mail, in any case", func(t *testing.T) {
		o := open(t)
		if _, ok, err := o.SlackUser(ctx, "ops@example.com"); ok || err != nil {
			t.Fatalf("unknown user: %v %v", ok, err)
		}
		if err := o.SetSlackUser(ctx, "Ops@Example.com", "U0OPS"); err != nil {
			t.Fatal(err)
		}
		if id, ok, err := o.SlackUser(ctx, "ops@example.COM"); id != "U0OPS" || !ok || err != nil {
			t.Fatalf("cached: %q %v %v", id, ok, err)
		}
	})

	t.Run("a mark is used once until it expires, also by racing callers", func(t *testing.T) {
		o := open(t)
		exp := t0.Add(10 * time.Minute)
		if first, err := o.FirstUse(ctx, "sig:ab", t0, exp); !first || err != nil {
			t.Fatalf("first use: %v %v", first, err)
		}
		if first, _ := o.FirstUse(ctx, "sig:ab", t0.Add(9*time.Minute), exp); first {
			t.Fatal("a replay inside the window was taken")
		}
		if first, _ := o.FirstUse(ctx, "sig:cd", t0, exp); !first {
			t.Fatal("another mark was refused")
		}
		if first, _ := o.FirstUse(ctx, "sig:ab", exp.Add(time.Second), exp.Add(10*time.Minute)); !first {
			t.Fatal("an expired mark still refuses")
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		firsts := 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first, err := o.FirstUse(ctx, "sig:race", t0, exp)
				if err != nil {
					t.Error(err)
				}
				if first {
					mu.Lock()
					firsts++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if firsts != 1 {
			t.Fatalf("8 racing uses of one mark: %d taken, want 1", firsts)
		}
		if _, err := o.Purge(ctx, t0, exp.Add(time.Hour), 100); err != nil {
			t.Fatal(err)
		}
		if first, _ := o.FirstUse(ctx, "sig:cd", exp.Add(time.Hour), exp.Add(2*time.Hour)); !first {
			t.Fatal("a purged mark still refuses")
		}
	})
}

func ids(rs []*notify.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ExecutionID+":"+r.ID)
	}
	return out
}
