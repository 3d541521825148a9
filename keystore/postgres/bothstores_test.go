package postgres_test

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// Behaviour where selection, bulk decisions, acknowledgements and checks
// meet, pinned on both stores at once (a real bbolt file and a real
// PostgreSQL): what one store does, the other must do too.

func bothStores(t *testing.T, clock *fakeclock.Clock) map[string]keystore.Store {
	t.Helper()
	b, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	base := pgtest.URL(t, "the tests that compare both stores")
	p, err := postgres.Open(context.Background(), pgtest.FreshSchema(t, base), postgres.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return map[string]keystore.Store{"bbolt": b, "postgres": p}
}

// goneUnknown reserves key with a short lease and lets it run out: the
// next reserve finds it unknown.
func goneUnknown(t *testing.T, s keystore.Store, clock *fakeclock.Clock, ns, key, holder string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: holder, Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: "n8n other exec"})
	if err != nil || r.Outcome != keystore.OutcomeStateUnknown {
		t.Fatalf("reserve after the lease: %+v %v", r.Outcome, err)
	}
}

// Holder and text filters fold non-ASCII letters the same on both stores
// ("text=café" finds CAFÉ-1, a holder "müller" finds MÜLLER): ILIKE under
// PostgreSQL's C collation folds ASCII only, so such parts are matched by
// Filter.Match, and a console search and a bulk decision select the same
// keys whichever store holds them.
func TestSelectFoldsNonASCIIOnBothStores(t *testing.T) {
	clock := fakeclock.New()
	ctx := context.Background()
	for name, s := range bothStores(t, clock) {
		goneUnknown(t, s, clock, "crm", "CAFÉ-1", "n8n MÜLLER-Sync exec 7")
		for _, f := range []keystore.Filter{{Text: "café"}, {Holder: "müller"}, {Namespace: "crm", Text: "É-1"}} {
			page, err := keystore.Select(ctx, s, f, "", 100)
			if err != nil {
				t.Fatalf("%s: select %+v: %v", name, f, err)
			}
			if len(page.Items) != 1 {
				t.Errorf("%s: select %+v found %d keys, want CAFÉ-1 (strings.ToLower folds it)", name, f, len(page.Items))
			}
		}
		res, err := keystore.ResolveMany(ctx, s, keystore.BulkResolveRequest{Filter: keystore.Filter{Text: "café"},
			Resolution: keystore.StateFailed, By: "ann", Note: "crm outage", DryRun: true})
		if err != nil || res.Matched != 1 {
			t.Errorf("%s: a dry bulk of text=café matched %d (%v), want 1", name, res.Matched, err)
		}
	}
}

// A bulk decision repeated with the same id (the CLI's retry, a double
// click of the console's confirm) decides a key once even when an
// acknowledgement ("Leave it to me" in Slack) came between: the replay
// check looks past acknowledgements to the key's last transition.
func TestBulkRepeatAfterAckDecidesOnce(t *testing.T) {
	clock := fakeclock.New()
	ctx := context.Background()
	for name, s := range bothStores(t, clock) {
		goneUnknown(t, s, clock, "crm", "ord-1", "n8n Orders exec 1")
		req := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm"}, Resolution: keystore.StateFailed,
			By: "ann", Note: "crm was down, retry", ID: "b-0000abcd"}
		res, err := keystore.ResolveMany(ctx, s, req)
		if err != nil || res.Decided != 1 {
			t.Fatalf("%s: first bulk: %+v %v", name, res, err)
		}
		if _, err := s.Acknowledge(ctx, keystore.AckRequest{Namespace: "crm", Key: "ord-1", Event: keystore.HistoryAcknowledged,
			By: "bob (Slack U1)", Detail: "Leave it to me (Slack)"}); err != nil {
			t.Fatalf("%s: ack: %v", name, err)
		}
		res, err = keystore.ResolveMany(ctx, s, req)
		if err != nil {
			t.Fatalf("%s: repeat: %v", name, err)
		}
		if res.Decided != 0 || res.Skipped[keystore.SkipDecided] != 1 {
			t.Errorf("%s: the same bulk id again after an ack: %+v, want decided 0, already_decided 1", name, res)
		}
		l, _ := s.Lookup(ctx, "crm", "ord-1")
		n := 0
		for _, h := range l.Record.History {
			if h.Event == keystore.HistoryResolved {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d resolved entries in the history, want 1", name, n)
		}
	}
}

// Checked sound (kept as a guard): an acknowledgement changes neither the
// record's UpdatedAt nor which time range selects it, on either store,
// and the record reads back (checksum) after it.
func TestAckKeepsUpdatedAtAndTimeRange(t *testing.T) {
	clock := fakeclock.New()
	ctx := context.Background()
	for name, s := range bothStores(t, clock) {
		goneUnknown(t, s, clock, "crm", "ack-1", "n8n Orders exec 1")
		before, err := s.Lookup(ctx, "crm", "ack-1")
		if err != nil {
			t.Fatal(err)
		}
		upTo := clock.Now().Add(time.Minute)
		clock.Advance(time.Hour)
		if _, err := s.Acknowledge(ctx, keystore.AckRequest{Namespace: "crm", Key: "ack-1", Event: keystore.HistorySnoozed, By: "bob"}); err != nil {
			t.Fatal(err)
		}
		after, err := s.Lookup(ctx, "crm", "ack-1")
		if err != nil || !after.Record.UpdatedAt.Equal(before.Record.UpdatedAt) {
			t.Errorf("%s: updated_at %v -> %v (%v)", name, before.Record.UpdatedAt, after.Record.UpdatedAt, err)
		}
		page, err := keystore.Select(ctx, s, keystore.Filter{To: upTo}, "", 10)
		if err != nil || len(page.Items) != 1 {
			t.Errorf("%s: a range ending before the ack found %d keys (%v), want 1", name, len(page.Items), err)
		}
	}
}

// Acknowledgements never push a key's transitions out of its history of
// keystore.MaxHistory entries, however often Snooze is pressed: a repeated
// acknowledgement adds nothing and at most a few are kept, so how the key
// got stuck and who decided stay in the history the console shows.
func TestAcksDoNotPushOutTheKeysTransitions(t *testing.T) {
	clock := fakeclock.New()
	ctx := context.Background()
	for name, s := range bothStores(t, clock) {
		goneUnknown(t, s, clock, "crm", "stuck-1", "n8n Orders exec 1")
		for i := 0; i < keystore.MaxHistory; i++ {
			clock.Advance(time.Hour)
			if _, err := s.Acknowledge(ctx, keystore.AckRequest{Namespace: "crm", Key: "stuck-1", Event: keystore.HistorySnoozed,
				By: "bob (Slack U1)", Detail: "Snoozed in Slack"}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := s.Lookup(ctx, "crm", "stuck-1")
		if err != nil {
			t.Fatal(err)
		}
		acks := 0
		for _, h := range l.Record.History {
			if h.Event == keystore.HistorySnoozed || h.Event == keystore.HistoryAcknowledged {
				acks++
			}
		}
		if acks == len(l.Record.History) {
			t.Errorf("%s: %d snoozes left only snoozes in the history (%d entries): how the key got stuck is gone", name, keystore.MaxHistory, len(l.Record.History))
		}
	}
}

// Checked sound (kept as a guard): a bulk decision of an unknown key whose
// check is claimed and being called decides it, and the check's answer
// that arrives afterwards is ignored (superseded), on both stores.
func TestBulkSupersedesAClaimedCheck(t *testing.T) {
	clock := fakeclock.New()
	ctx := context.Background()
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"crm": {Check: "crm-lookup"}}}
	b, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Clock: clock.Now, Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := postgres.Open(ctx, pgtest.FreshSchema(t, pgtest.URL(t, "the tests that compare both stores")), postgres.Options{Clock: clock.Now, Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for name, s := range map[string]keystore.Store{"bbolt": b, "postgres": p} {
		goneUnknown(t, s, clock, "crm", "chk-1", "n8n Orders exec 1")
		l, _ := s.Lookup(ctx, "crm", "chk-1")
		if l.Record.Check == nil {
			t.Fatalf("%s: no check hold on %+v", name, l.Record)
		}
		if _, c, err := s.ClaimCheck(ctx, "crm", "chk-1", l.Record.Attempt, time.Minute, 3); err != nil || c != keystore.CheckClaimed {
			t.Fatalf("%s: claim: %v %v", name, c, err)
		}
		res, err := keystore.ResolveMany(ctx, s, keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm"},
			Resolution: keystore.StateFailed, By: "ann", Note: "retry all"})
		if err != nil || res.Decided != 1 {
			t.Fatalf("%s: bulk over a claimed check: %+v %v", name, res, err)
		}
		if _, ok, err := s.CheckAnswered(ctx, "crm", "chk-1", l.Record.Attempt, keystore.CheckAnswer{Result: keystore.CheckFound, Reference: "crm-9"}); err != nil || ok {
			t.Errorf("%s: the check's late answer was taken (ok %v, %v)", name, ok, err)
		}
		if l, _ = s.Lookup(ctx, "crm", "chk-1"); l.Record.State != keystore.StateFailed || l.Record.Check != nil {
			t.Errorf("%s: after the bulk and the late answer: %s %+v", name, l.Record.State, l.Record.Check)
		}
	}
}

// The same keys on both stores, the same filters: the same keys selected
// (a differential check of Select and of a dry bulk's Matched), every
// filter also walked in pages of one.
func TestSelectSameOnBothStores(t *testing.T) {
	clock := fakeclock.New()
	ctx := context.Background()
	stores := bothStores(t, clock)
	order := []string{"bbolt", "postgres"}
	var t0, t1 time.Time
	each := func(f func(s keystore.Store)) {
		for _, n := range order {
			f(stores[n])
		}
	}
	t0 = clock.Now()
	for _, k := range [][3]string{{"crm", "ord-1", "n8n LeadCrm exec 1"}, {"crm", "ord_2", "n8n LeadCrm exec 2"}, {"billing", "ord-3", "n8n Billing exec 3"}} {
		each(func(s keystore.Store) {
			if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: k[0], Key: k[1], Owner: k[2], Lease: time.Second}); err != nil {
				t.Fatal(err)
			}
		})
		clock.Advance(2 * time.Second)
		each(func(s keystore.Store) {
			if r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: k[0], Key: k[1], Owner: "n8n other"}); err != nil || r.Outcome != keystore.OutcomeStateUnknown {
				t.Fatalf("%v %v", r.Outcome, err)
			}
		})
		if k[1] == "ord_2" {
			t1 = clock.Now() // ord_2's last change: From includes it, To excludes it
		}
	}
	clock.Advance(time.Second)
	each(func(s keystore.Store) {
		for _, k := range []struct{ ns, key, holder, dest string }{{"crm", "ord-4", "n8n Orders 100% exec 4", "hubspot"}, {"crm", "inv-5", "n8n LeadCrm exec 5", ""}, {"billing", "ord%6", "n8n Billing exec 6", "hubspot"}} {
			r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: k.ns, Key: k.key, Owner: k.holder, Destination: k.dest, Lease: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if k.key == "ord-4" {
				if _, err := s.Fail(ctx, keystore.FailRequest{Namespace: k.ns, Key: k.key, Token: r.Token, Reason: keystore.ReasonDestinationFailed}); err != nil {
					t.Fatal(err)
				}
			}
			if k.key == "ord%6" {
				if _, err := s.Complete(ctx, keystore.CompleteRequest{Namespace: k.ns, Key: k.key, Token: r.Token}); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	filters := []keystore.Filter{
		{}, {Namespace: "crm"}, {KeyPrefix: "ord"}, {KeyPrefix: "ord_"}, {KeyPrefix: "ord%"}, {Namespace: "crm", KeyPrefix: "ord-"},
		{Text: "D-"}, {Text: "%"}, {Text: "_"}, {Holder: "leadcrm"}, {Holder: "100%"}, {Holder: "exec _"},
		{States: []keystore.State{keystore.StateUnknown, keystore.StateFailed}}, {States: []keystore.State{keystore.StateReserved}},
		{States: []keystore.State{keystore.StateCompleted, keystore.StateReserved}}, {Destination: "hubspot"},
		{Reason: keystore.ReasonDestinationFailed}, {From: t1}, {To: t1}, {From: t0, To: t1},
		{Namespace: "crm", States: []keystore.State{keystore.StateUnknown}, Holder: "EXEC"},
	}
	for _, f := range filters {
		var got [2][]string
		for i, n := range order {
			var keys []string
			for cursor, pages := "", 0; pages < 50; pages++ {
				page, err := keystore.Select(ctx, stores[n], f, cursor, 1)
				if err != nil {
					t.Fatalf("%s: %+v: %v", n, f, err)
				}
				for _, r := range page.Items {
					keys = append(keys, r.Namespace+"/"+r.Key)
				}
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			sort.Strings(keys)
			got[i] = keys
		}
		if strings.Join(got[0], " ") != strings.Join(got[1], " ") {
			t.Errorf("filter %+v: bbolt %v, postgres %v", f, got[0], got[1])
		}
	}
}
