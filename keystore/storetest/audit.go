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
