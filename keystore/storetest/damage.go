package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Damaged records (keystore/damage.go): a record that fails its checksum
// is skipped by every listing and runner and never holds back another
// key; the store reports it once, with an event for the namespace's owner
// that names the key and the runbook.

// Damage changes the stored record of ns/key beneath s, as damaged
// storage would, so that it fails its checksum. Each backend brings its
// own (a flipped byte in bbolt, a column changed in PostgreSQL).
type Damage func(t *testing.T, s keystore.Store, ns, key string)

// RunDamage runs the damaged-record cases.
func RunDamage(t *testing.T, newStore New, damage Damage) {
	pol := keystore.Policies{
		Namespaces: map[string]keystore.NamespacePolicy{
			ns:      {Check: "crm-lookup"},
			gatedNS: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}},
		},
		Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1}},
	}
	t.Run("a damaged parked record among intact ones: the intact ones are listed and resumed, the damaged one reported once", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		for i := range 6 {
			wantOutcome(t, e.reserve(ns, fmt.Sprintf("evt_%d", i), withDest("hubspot"), withResume(fmt.Sprint(300+i))), keystore.OutcomeParked)
			e.clock.Advance(time.Second)
		}
		// The oldest (the next probe) and one in the middle.
		damage(t, e.s, ns, "evt_0")
		damage(t, e.s, ns, "evt_3")
		for range 3 {
			if got := parkedKeys(t, e, "hubspot"); fmt.Sprint(got) != "[evt_1 evt_2 evt_4 evt_5]" {
				t.Fatalf("parked = %v, want the intact keys oldest first", got)
			}
		}
		// Pages stay full past damaged records.
		var paged []string
		q := queue("hubspot")
		q.Limit = 1
		for range 10 {
			rs, err := e.s.ParkedByWait(e.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 0 {
				break
			}
			paged = append(paged, rs[0].Key)
			q = q.Next(rs[0])
		}
		if fmt.Sprint(paged) != "[evt_1 evt_2 evt_4 evt_5]" {
			t.Fatalf("parked one at a time = %v", paged)
		}
		e.clock.Advance(time.Minute) // the cooldown is over
		_, _, err := e.s.ClaimResume(e.ctx, ns, "evt_0", 30*time.Second)
		wantCode(t, err, errs.RecordDamaged)
		if !claim(t, e, "evt_1") {
			t.Fatal("the oldest intact key could not be claimed as the probe")
		}
		if _, err := e.s.Lookup(e.ctx, ns, "evt_3"); errs.CodeOf(err) != errs.RecordDamaged || !strings.Contains(err.Error(), ns+"/evt_3") {
			t.Fatalf("lookup of the damaged key: %v", err)
		}
		reportedOnce(t, e, "evt_0", "evt_3")
	})
	t.Run("a damaged key held for a check is skipped; the others are checked", func(t *testing.T) {
		e := setup(t, newStore, pol)
		for _, k := range []string{"held_1", "held_2", "held_3"} {
			unknownHeld(t, e, k, "")
			e.clock.Advance(time.Second)
		}
		damage(t, e.s, ns, "held_1")
		for range 2 {
			if got := heldKeys(t, e); fmt.Sprint(got) != "[held_2 held_3]" {
				t.Fatalf("held for a check = %v", got)
			}
		}
		if c := claimCheck(t, e, "held_2", 1); c != keystore.CheckClaimed {
			t.Fatalf("claim the check of an intact key: %v", c)
		}
		reportedOnce(t, e, "held_1")
	})
	t.Run("a damaged key awaiting approval is left out of the listing; the decided ones are resumed", func(t *testing.T) {
		e := setup(t, newStore, pol)
		for _, k := range []string{"inv_1", "inv_2"} {
			wantOutcome(t, e.reserve(gatedNS, k, withDest("hubspot"), withResume(k), requestedBy("ann"), invoice), keystore.OutcomeParked)
			if _, err := e.decide(false, k, "bob", "amount checked"); err != nil {
				t.Fatal(err)
			}
		}
		damage(t, e.s, gatedNS, "inv_1")
		page, err := e.s.List(e.ctx, keystore.ListQuery{Namespace: gatedNS, State: keystore.StateParked})
		if err != nil || len(page.Items) != 1 || page.Items[0].Key != "inv_2" {
			t.Fatalf("decided keys listed: %v %v", page.Items, err)
		}
		if !e.claimGated("inv_2") {
			t.Fatal("the intact approved key could not be claimed")
		}
		reportedOnce(t, e, "inv_1")
	})
	t.Run("a damaged key at a stage: the pages of its stage stay full past it", func(t *testing.T) {
		// The queues (the approval resumer, the re-run worker) read a
		// stage in pages and stop at the first page shorter than asked:
		// a damaged key skipped on a full page hid every key behind it.
		e := setup(t, newStore, pol)
		for _, k := range []string{"inv_1", "inv_2", "inv_3"} {
			wantOutcome(t, e.reserve(gatedNS, k, withDest("hubspot"), withResume(k), requestedBy("ann"), invoice), keystore.OutcomeParked)
			if _, err := e.decide(false, k, "bob", "amount checked"); err != nil {
				t.Fatal(err)
			}
		}
		damage(t, e.s, gatedNS, "inv_1")
		rs, err := e.s.KeysAtStage(e.ctx, keystore.StageQuery{Stage: keystore.PhaseApproved, Namespace: gatedNS, Limit: 2})
		if got := keysOfRecords(rs); err != nil || fmt.Sprint(got) != "["+gatedNS+"/inv_2 "+gatedNS+"/inv_3]" {
			t.Fatalf("approved keys in a page of 2 past a damaged one: %v %v, want inv_2 and inv_3", got, err)
		}
	})
	for _, c := range []struct {
		name     string
		complete bool // the keys finished: their retention ends, not their lease
		swept    func(keystore.SweepStats) int
		intact   keystore.Outcome
	}{
		{"a damaged reservation whose lease ran out is left as it is; the sweep goes on past it", false,
			func(st keystore.SweepStats) int { return st.LeasesExpired }, keystore.OutcomeFound},
		{"a damaged record past its retention is left as it is; the sweep deletes the others past it", true,
			func(st keystore.SweepStats) int { return st.Expired }, keystore.OutcomeAbsent},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, newStore, keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Retention: time.Hour}}})
			for _, k := range []string{"key_1", "key_2", "key_3"} {
				r := e.reserve(ns, k)
				wantOutcome(t, r, keystore.OutcomeAccepted)
				if c.complete {
					e.complete(ns, k, r.Token, "ref")
				}
				e.clock.Advance(time.Second) // leases and retentions end in this order: the damaged one first
			}
			damage(t, e.s, ns, "key_1")
			e.clock.Advance(2 * time.Hour)
			st, err := e.s.Sweep(e.ctx)
			if err != nil || c.swept(st) != 2 {
				t.Fatalf("sweep: %+v %v, want the 2 intact keys swept", st, err)
			}
			for _, k := range []string{"key_2", "key_3"} {
				r := e.lookup(ns, k)
				wantOutcome(t, r, c.intact)
				if r.Record != nil {
					wantState(t, r, keystore.StateUnknown)
				}
			}
			_, err = e.s.Lookup(e.ctx, ns, "key_1")
			wantCode(t, err, errs.RecordDamaged)
			if st, err := e.s.Sweep(e.ctx); err != nil || c.swept(st) != 0 {
				t.Fatalf("the next sweep: %+v %v", st, err)
			}
			reportedOnce(t, e, "key_1")
		})
	}
}

// reportedOnce waits for the events about the damaged keys (written
// after the read that found them) and checks each came once, naming its
// key and the runbook, and no other key was reported.
func reportedOnce(t *testing.T, e *env, keys ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	var got map[string]int
	testwait.Poll(testwait.Deadline, func() bool {
		got = map[string]int{}
		for _, ev := range e.events() {
			if ev.Kind != keystore.EventRecordDamaged {
				continue
			}
			if !want[ev.Key] {
				t.Fatalf("an intact key was reported damaged: %+v", ev)
			}
			if !strings.Contains(ev.Message, `docs/runbooks.md, "A key answers record_damaged"`) || ev.Namespace == "" {
				t.Fatalf("the event does not name the runbook and namespace: %+v", ev)
			}
			got[ev.Key]++
		}
		return len(got) == len(want)
	})
	for _, k := range keys {
		if got[k] != 1 {
			t.Fatalf("events about damaged %s: %d, want 1 (all: %v)", k, got[k], got)
		}
	}
}
