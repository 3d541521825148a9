package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The console's audit list: the event log newest first, by kind, a page
// at a time.
func runAudit(t *testing.T, newStore New) {
	t.Run("recent events newest first, by kind, paged by seq", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		for i := range 5 {
			key := fmt.Sprintf("a-%d", i)
			e.unknown(ns, key, "n8n exec 1")
			if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateFailed,
				By: fmt.Sprintf("person-%d", i), Note: "checked"}); err != nil {
				t.Fatal(err)
			}
		}
		all, err := e.s.RecentEvents(e.ctx, keystore.EventQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 10 || !slices.IsSortedFunc(all, func(a, b keystore.Event) int { return int(b.Seq) - int(a.Seq) }) {
			t.Fatalf("every event newest first: %d events %v", len(all), all)
		}
		var who []string
		before := uint64(0)
		for range 10 {
			page, err := e.s.RecentEvents(e.ctx, keystore.EventQuery{Before: before, Kinds: keystore.DecisionKinds, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, ev := range page {
				if ev.Kind != keystore.EventKeyResolved || ev.Namespace != ns {
					t.Fatalf("a decision page holds %+v", ev)
				}
				who = append(who, ev.Owner)
			}
			before = page[len(page)-1].Seq
		}
		if want := []string{"person-4", "person-3", "person-2", "person-1", "person-0"}; !slices.Equal(who, want) {
			t.Fatalf("decisions paged newest first: %v, want %v", who, want)
		}
		unknown, err := e.s.RecentEvents(e.ctx, keystore.EventQuery{Kinds: []keystore.EventKind{keystore.EventKeyUnknown}, Limit: 1})
		if err != nil || len(unknown) != 1 || unknown[0].Key != "a-4" {
			t.Fatalf("the newest key_unknown: %v %v", unknown, err)
		}
		// Past the oldest: nothing; a Before beyond the newest: from the newest.
		if old, err := e.s.RecentEvents(e.ctx, keystore.EventQuery{Before: all[len(all)-1].Seq}); err != nil || len(old) != 0 {
			t.Fatalf("before the oldest: %v %v", old, err)
		}
		if top, err := e.s.RecentEvents(e.ctx, keystore.EventQuery{Before: all[0].Seq + 100, Limit: 1}); err != nil || len(top) != 1 || top[0].Seq != all[0].Seq {
			t.Fatalf("before a seq not yet written: %v %v", top, err)
		}
	})
}

// runFailureDecisions: a decision on a failed execution (no key) is
// written to the event log alone and read back by the audit, in order
// with the key decisions; a malformed one writes nothing.
func runFailureDecisions(t *testing.T, newStore New) {
	e := setup(t, newStore, keystore.Policies{})
	e.unknown(ns, "a-1", "n8n exec 1")
	if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "a-1", Resolution: keystore.StateFailed, By: "ann", Note: "checked"}); err != nil {
		t.Fatal(err)
	}
	rec := e.s
	for _, bad := range []keystore.Event{
		{Kind: keystore.EventKeyResolved, Owner: "ann", Message: "acknowledged"},
		{Kind: keystore.EventFailureDecided, Message: "acknowledged"},
		{Kind: keystore.EventFailureDecided, Owner: "ann", Message: "acknowledged", Namespace: ns, Key: "a-1"},
	} {
		if err := rec.RecordDecision(e.ctx, bad); err == nil {
			t.Fatalf("a malformed decision %+v was recorded", bad)
		}
	}
	ev := keystore.Event{Kind: keystore.EventFailureDecided, Owner: "bob (console)", Message: "acknowledged", Summary: "execution 4711 of Sync CRM (node HTTP Request)"}
	if err := rec.RecordDecision(e.ctx, ev); err != nil {
		t.Fatal(err)
	}
	e.restart()
	entries, _, err := keystore.Audit(e.ctx, e.s, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Kind != keystore.EventFailureDecided || entries[1].Kind != keystore.EventKeyResolved {
		t.Fatalf("the audit: %+v, want the failure's decision above the key's", entries)
	}
	got := entries[0].Event
	if got.Owner != ev.Owner || got.Message != ev.Message || got.Summary != ev.Summary || got.Key != "" || got.Namespace != "" || got.At.IsZero() {
		t.Fatalf("the failure's decision read back as %+v", got)
	}
	counts, err := e.s.Counts(e.ctx)
	if err != nil || len(counts) != 1 || len(counts[ns]) != 1 || counts[ns][keystore.StateFailed] != 1 {
		t.Fatalf("a decision on no key wrote a record: counts %v %v", counts, err)
	}
}
