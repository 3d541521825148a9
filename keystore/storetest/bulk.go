package storetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Bulk decisions (keystore/filter.go, keystore/bulk.go): one selection by
// Filter, every selected key decided by one person with one reason, each
// key's history naming the bulk action.

// incident is the keys of a CRM incident in every state a bulk decision
// meets; t1 lies between the two first keys and the rest.
func (e *env) incident() (t1 time.Time) {
	e.t.Helper()
	e.unknown(ns, "ord-1", "n8n LeadCrm exec 1")
	e.unknown(ns, "ord-2", "n8n LeadCrm exec 2")
	e.clock.Advance(time.Hour)
	t1 = e.clock.Now()
	e.clock.Advance(time.Minute)
	f := e.reserve(ns, "ord-3", withDest("salesforce"), func(q *keystore.ReserveRequest) { q.Owner = "n8n Orders exec 3" })
	e.fail(ns, "ord-3", f.Token, keystore.ReasonDestinationFailed)
	e.reserve(ns, "inv-4", withDest("hubspot"), func(q *keystore.ReserveRequest) { q.Owner = "n8n LeadCrm exec 4" })
	c := e.reserve(ns, "ord-5", withDest("hubspot"))
	e.complete(ns, "ord-5", c.Token, "crm-5")
	e.unknown("other", "ord-6", "n8n LeadCrm exec 6")
	e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("201"), requestedBy("ann"), invoice)
	return t1
}

func selectAll(t *testing.T, e *env, f keystore.Filter) []string {
	t.Helper()
	var out []string
	for cursor, pages := "", 0; ; pages++ {
		// Pages of one: every cursor, also from one index to the next.
		page, err := keystore.Select(e.ctx, e.s, f, cursor, 1)
		if err != nil {
			t.Fatalf("select %+v: %v", f, err)
		}
		if len(page.Items) > 1 || pages > 20 {
			t.Fatalf("select %+v: %d items on a page of one, page %d", f, len(page.Items), pages)
		}
		out = append(out, keysOf(page.Items)...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	slices.Sort(out)
	return out
}

func (e *env) snapshot(keys ...string) string {
	e.t.Helper()
	var b strings.Builder
	for _, k := range keys {
		n, key, _ := strings.Cut(k, "/")
		j, _ := json.Marshal(e.lookup(n, key).Record)
		b.Write(j)
		b.WriteByte('\n')
	}
	j, _ := json.Marshal(e.events())
	b.Write(j)
	return b.String()
}

func (e *env) bulk(req keystore.BulkResolveRequest) keystore.BulkResult {
	e.t.Helper()
	res, err := keystore.ResolveMany(e.ctx, e.s, req)
	if err != nil {
		e.t.Fatalf("bulk %+v: %v", req, err)
	}
	return res
}

func wantBulk(t *testing.T, got keystore.BulkResult, matched, decided int, skipped map[string]int) {
	t.Helper()
	if got.Matched != matched || got.Decided != decided || len(got.Skipped) != len(skipped) {
		t.Fatalf("bulk result %+v, want matched %d decided %d skipped %v", got, matched, decided, skipped)
	}
	for why, n := range skipped {
		if got.Skipped[why] != n {
			t.Fatalf("bulk result %+v, want matched %d decided %d skipped %v", got, matched, decided, skipped)
		}
	}
}

func runBulk(t *testing.T, newStore New) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{gatedNS: {Approval: keystore.ApprovalPolicy{Required: true}}}}
	all := []string{ns + "/inv-4", ns + "/ord-1", ns + "/ord-2", ns + "/ord-3", ns + "/ord-5", gatedNS + "/inv_1", "other/ord-6"} // sorted

	t.Run("select by every filter field, across namespaces and pages", func(t *testing.T) {
		e := setup(t, newStore, pol)
		t1 := e.incident()
		st := func(s ...keystore.State) []keystore.State { return s }
		for _, c := range []struct {
			name string
			f    keystore.Filter
			want []string
		}{
			{"everything", keystore.Filter{}, all},
			{"namespace", keystore.Filter{Namespace: ns}, []string{ns + "/inv-4", ns + "/ord-1", ns + "/ord-2", ns + "/ord-3", ns + "/ord-5"}},
			{"destination", keystore.Filter{Destination: "salesforce"}, []string{ns + "/ord-3"}},
			{"unknown in every namespace", keystore.Filter{States: st(keystore.StateUnknown)}, []string{ns + "/ord-1", ns + "/ord-2", "other/ord-6"}},
			{"failed and unknown of a namespace", keystore.Filter{Namespace: ns, States: st(keystore.StateUnknown, keystore.StateFailed)}, []string{ns + "/ord-1", ns + "/ord-2", ns + "/ord-3"}},
			{"reserved", keystore.Filter{States: st(keystore.StateReserved)}, []string{ns + "/inv-4"}},
			{"reserved and unknown of a namespace", keystore.Filter{Namespace: "other", States: st(keystore.StateReserved, keystore.StateUnknown)}, []string{"other/ord-6"}},
			{"parked", keystore.Filter{States: st(keystore.StateParked)}, []string{gatedNS + "/inv_1"}},
			{"completed", keystore.Filter{States: st(keystore.StateCompleted)}, []string{ns + "/ord-5"}},
			{"reason", keystore.Filter{Reason: keystore.ReasonDestinationFailed}, []string{ns + "/ord-3"}},
			{"holder, a part in any case", keystore.Filter{Holder: "leadcrm"}, []string{ns + "/inv-4", ns + "/ord-1", ns + "/ord-2", "other/ord-6"}},
			{"holder with state unknown", keystore.Filter{Holder: "LeadCrm exec", States: st(keystore.StateUnknown)}, []string{ns + "/ord-1", ns + "/ord-2", "other/ord-6"}},
			{"key prefix in a namespace", keystore.Filter{Namespace: ns, KeyPrefix: "ord-"}, []string{ns + "/ord-1", ns + "/ord-2", ns + "/ord-3", ns + "/ord-5"}},
			{"key prefix in a namespace, unknown", keystore.Filter{Namespace: ns, KeyPrefix: "ord-", States: st(keystore.StateUnknown)}, []string{ns + "/ord-1", ns + "/ord-2"}},
			{"key prefix in every namespace", keystore.Filter{KeyPrefix: "ord-"}, []string{ns + "/ord-1", ns + "/ord-2", ns + "/ord-3", ns + "/ord-5", "other/ord-6"}},
			{"text, a part in any case", keystore.Filter{Text: "RD-"}, []string{ns + "/ord-1", ns + "/ord-2", ns + "/ord-3", ns + "/ord-5", "other/ord-6"}},
			{"changed before", keystore.Filter{To: t1}, []string{ns + "/ord-1", ns + "/ord-2"}},
			{"changed since", keystore.Filter{From: t1, States: st(keystore.StateUnknown)}, []string{"other/ord-6"}},
			{"nothing", keystore.Filter{Namespace: ns, Destination: "salesforce", States: st(keystore.StateUnknown)}, nil},
		} {
			if got := selectAll(t, e, c.f); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
		_, err := keystore.Select(e.ctx, e.s, keystore.Filter{States: []keystore.State{"lost"}}, "", 10)
		wantCode(t, err, errs.InvalidRequest)
		_, err = keystore.Select(e.ctx, e.s, keystore.Filter{}, "bm90IGEgY3Vyc29y", 10)
		wantCode(t, err, errs.InvalidRequest)
	})

	t.Run("bulk resolve of mixed states: dry run changes nothing, each decided key names the bulk and the person, a repeat decides nothing", func(t *testing.T) {
		e := setup(t, newStore, pol)
		e.incident()
		// Every state, written out: a bulk decision has no form of "every key".
		every := keystore.Filter{States: []keystore.State{keystore.StateReserved, keystore.StateCompleted, keystore.StateFailed, keystore.StateUnknown, keystore.StateParked}}
		req := keystore.BulkResolveRequest{Filter: every, Resolution: keystore.StateFailed, By: "ann@example.com", Note: "CRM incident 4711: retry after the fix"}
		skipped := map[string]int{keystore.SkipLiveLease: 1, keystore.SkipCompleted: 1, keystore.SkipAwaitingApproval: 1}

		before := e.snapshot(all...)
		dry := req
		dry.DryRun = true
		res := e.bulk(dry)
		wantBulk(t, res, 7, 4, skipped)
		if !res.DryRun || !regexp.MustCompile(`^b-[0-9a-f]{8}$`).MatchString(res.ID) {
			t.Fatalf("dry run answer %+v: want dry_run and a made id", res)
		}
		if after := e.snapshot(all...); after != before {
			t.Fatalf("a dry run changed the store:\nbefore %s\nafter  %s", before, after)
		}

		req.ID = "b-0000cafe"
		e.clock.Advance(time.Minute)
		res = e.bulk(req)
		wantBulk(t, res, 7, 4, skipped)
		if res.ID != req.ID || res.DryRun {
			t.Fatalf("answer %+v", res)
		}
		events := map[string]int{}
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventKeyResolved {
				if ev.Owner != req.By {
					t.Fatalf("event %+v does not name the person", ev)
				}
				events[ev.Namespace+"/"+ev.Key]++
			}
		}
		decided := []string{ns + "/ord-1", ns + "/ord-2", ns + "/ord-3", "other/ord-6"}
		for _, k := range decided {
			n, key, _ := strings.Cut(k, "/")
			r := e.lookup(n, key).Record
			last := r.History[len(r.History)-1]
			if r.State != keystore.StateFailed || !r.Retryable || r.ResolvedBy != req.By || last.By != req.By ||
				last.Detail != "bulk b-0000cafe, failed: "+req.Note || events[k] != 1 {
				t.Fatalf("%s after the bulk: state %s retryable %v by %q, history %+v, %d events", k, r.State, r.Retryable, r.ResolvedBy, last, events[k])
			}
		}
		if len(events) != len(decided) {
			t.Fatalf("resolved events for %v, want %v", events, decided)
		}

		e.restart()
		before = e.snapshot(all...)
		e.clock.Advance(time.Minute)
		res = e.bulk(req)
		wantBulk(t, res, 7, 0, map[string]int{keystore.SkipDecided: 4, keystore.SkipLiveLease: 1, keystore.SkipCompleted: 1, keystore.SkipAwaitingApproval: 1})
		if after := e.snapshot(all...); after != before {
			t.Fatalf("a repeat of the bulk changed the store:\nbefore %s\nafter  %s", before, after)
		}
	})

	t.Run("a bulk writes what single resolutions write; failed for good, repeated, decides nothing new", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		e.unknown(ns, "a-1", "n8n exec 1")
		e.unknown(ns, "b-1", "n8n exec 1")
		single, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "a-1", Resolution: keystore.StateFailed, Final: true,
			By: "bob", Note: "duplicate order", Bulk: "b-00000001"})
		if err != nil {
			t.Fatal(err)
		}
		req := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: ns, KeyPrefix: "b-"}, Resolution: keystore.StateFailed, Final: true,
			By: "bob", Note: "duplicate order", ID: "b-00000001"}
		wantBulk(t, e.bulk(req), 1, 1, nil)
		bulk := e.lookup(ns, "b-1").Record
		a, _ := json.Marshal(single.Record.History)
		b, _ := json.Marshal(bulk.History)
		if string(a) != string(b) || bulk.Retryable || bulk.State != keystore.StateFailed {
			t.Fatalf("history of a bulk decision %s, of a single one %s", b, a)
		}
		var evs []keystore.Event
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventKeyResolved {
				ev.Key, ev.Seq = "", 0
				evs = append(evs, ev)
			}
		}
		if len(evs) != 2 || evs[0] != evs[1] {
			t.Fatalf("resolved events of a single and a bulk decision: %+v", evs)
		}
		before := e.snapshot(ns+"/a-1", ns+"/b-1")
		wantBulk(t, e.bulk(req), 1, 0, map[string]int{keystore.SkipDecided: 1})
		if after := e.snapshot(ns+"/a-1", ns+"/b-1"); after != before {
			t.Fatalf("a repeat changed the store:\nbefore %s\nafter  %s", before, after)
		}
	})

	t.Run("the events of a bulk name it and the store keeps its words, across a restart; a single decision names none", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		for _, k := range []string{"ord-1", "ord-2", "ord-3", "one-1"} {
			e.unknown(ns, k, "n8n exec 1")
		}
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "one-1", Resolution: keystore.StateCompleted,
			By: "bob", Note: "written by hand"}); err != nil {
			t.Fatal(err)
		}
		req := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: ns, KeyPrefix: "ord-"}, Resolution: keystore.StateFailed, Final: true,
			By: "ann@example.com", Note: "CRM incident 4711: duplicates", ID: "b-0000beef"}
		e.clock.Advance(time.Minute)
		at := e.clock.Now()
		wantBulk(t, e.bulk(req), 3, 3, nil)
		e.restart()
		bulk := map[string]string{}
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventKeyResolved {
				bulk[ev.Key] = ev.Bulk
			}
		}
		if want := map[string]string{"ord-1": "b-0000beef", "ord-2": "b-0000beef", "ord-3": "b-0000beef", "one-1": ""}; !maps.Equal(bulk, want) {
			t.Fatalf("the bulk named by each resolved event: %v, want %v", bulk, want)
		}
		recent, err := e.s.RecentEvents(e.ctx, keystore.EventQuery{Kinds: keystore.DecisionKinds, Limit: 1})
		if err != nil || len(recent) != 1 || recent[0].Bulk != "b-0000beef" {
			t.Fatalf("the newest decision read for the audit: %+v %v, want one of bulk b-0000beef", recent, err)
		}
		kept, err := e.s.BulkActions(e.ctx, []string{"b-0000beef", "b-nothere"})
		if err != nil {
			t.Fatal(err)
		}
		a, ok := kept["b-0000beef"]
		if len(kept) != 1 || !ok || a.ID != req.ID || a.By != req.By || a.Note != req.Note || a.Resolution != keystore.StateFailed || !a.Final || !a.At.Equal(at) {
			t.Fatalf("the kept bulk actions %+v, want b-0000beef by %s at %s, final, with its note", kept, req.By, at)
		}
		mine, err := e.s.RecentEvents(e.ctx, keystore.EventQuery{Bulk: "b-0000beef", Limit: 2})
		if err != nil || len(mine) != 2 || mine[0].Key != "ord-3" || mine[1].Key != "ord-2" {
			t.Fatalf("the newest two events of the bulk: %+v %v, want ord-3 and ord-2", mine, err)
		}
		audit, next, err := keystore.Audit(e.ctx, e.s, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(audit) != 2 || next != 0 || audit[0].Bulk != "b-0000beef" || audit[0].Keys != 3 || audit[0].Action == nil || audit[0].Action.Note != req.Note ||
			audit[1].Key != "one-1" || audit[1].Keys != 0 || audit[1].Owner != "bob" {
			t.Fatalf("the audit: %+v (next %d), want the bulk as one entry of 3 keys with its note, then bob's single decision", audit, next)
		}
		if page, next, err := keystore.Audit(e.ctx, e.s, 0, 1); err != nil || len(page) != 1 || page[0].Keys != 3 || next != audit[1].Seq+1 {
			t.Fatalf("an audit page of one entry: %+v, next %d (%v), want the whole bulk and then bob's decision", page, next, err)
		}
	})

	t.Run("a bulk id reused with other content is a conflict and changes nothing; a dry run claims no id", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		for _, k := range []string{"ord-1", "ord-2"} {
			e.unknown(ns, k, "n8n exec 1")
		}
		e.unknown("other", "ord-3", "n8n exec 1")
		keys := []string{ns + "/ord-1", ns + "/ord-2", "other/ord-3"}
		req := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: ns, KeyPrefix: "ord-"}, Resolution: keystore.StateFailed,
			By: "ann", Note: "CRM incident 4711", ID: "b-0000beef"}
		// A dry run under the id with other content: a question, it keeps nothing.
		dry := req
		dry.Note, dry.DryRun = "counting first", true
		wantBulk(t, e.bulk(dry), 2, 2, nil)
		wantBulk(t, e.bulk(req), 2, 2, nil)
		e.restart()
		before := e.snapshot(keys...)
		for name, mod := range map[string]func(*keystore.BulkResolveRequest){
			"another note":         func(r *keystore.BulkResolveRequest) { r.Note = "CRM incident 4712" },
			"another selection":    func(r *keystore.BulkResolveRequest) { r.Filter = keystore.Filter{Namespace: "other"} },
			"another resolution":   func(r *keystore.BulkResolveRequest) { r.Final = true },
			"another person":       func(r *keystore.BulkResolveRequest) { r.By = "bob" },
			"the id spelled again": func(r *keystore.BulkResolveRequest) { r.ID, r.Note = " b-0000beef ", "x" },
		} {
			other := req
			mod(&other)
			for via, resolve := range map[string]func(keystore.BulkResolveRequest) (keystore.BulkResult, error){
				"keystore.ResolveMany": func(r keystore.BulkResolveRequest) (keystore.BulkResult, error) {
					return keystore.ResolveMany(e.ctx, e.s, r)
				},
				"the store": func(r keystore.BulkResolveRequest) (keystore.BulkResult, error) { return e.s.ResolveMany(e.ctx, r) },
			} {
				res, err := resolve(other)
				if errs.CodeOf(err) != errs.Conflict || res.Decided != 0 {
					t.Fatalf("%s through %s: %+v %v, want conflict", name, via, res, err)
				}
				wantField(t, err, errs.Conflict, "id", "unique")
			}
		}
		if after := e.snapshot(keys...); after != before {
			t.Fatalf("a reused id changed the store:\nbefore %s\nafter  %s", before, after)
		}
		// The same content again is a repeat: it decides nothing twice.
		wantBulk(t, e.bulk(req), 2, 0, map[string]int{keystore.SkipDecided: 2})
		states := []keystore.State{keystore.StateUnknown, keystore.StateFailed}
		spelled := req
		spelled.Filter.States, spelled.Filter.Namespace = states, " "+ns
		first := spelled
		first.ID = "b-0000d00d"
		wantBulk(t, e.bulk(first), 2, 0, map[string]int{keystore.SkipDecided: 2})
		slices.Reverse(states)
		wantBulk(t, e.bulk(first), 2, 0, map[string]int{keystore.SkipDecided: 2}) // the order of the states is not content
	})

	t.Run("an empty filter is refused by the store: no bulk decision takes every key", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		e.unknown(ns, "ord-1", "n8n exec 1")
		before := e.snapshot(ns + "/ord-1")
		for _, f := range []keystore.Filter{{}, {Namespace: "  ", Holder: " ", Text: "\t"}} {
			for _, dry := range []bool{true, false} {
				req := keystore.BulkResolveRequest{Filter: f, Resolution: keystore.StateFailed, By: "ann", Note: "everything", DryRun: dry}
				_, err := e.s.ResolveMany(e.ctx, req)
				wantField(t, err, errs.InvalidRequest, "filter", "required")
				_, err = keystore.ResolveMany(e.ctx, e.s, req)
				wantField(t, err, errs.InvalidRequest, "filter", "required")
			}
		}
		if after := e.snapshot(ns + "/ord-1"); after != before {
			t.Fatalf("a refused bulk changed the store")
		}
	})

	t.Run("a bulk decision while single decisions and reserves go on: each key decided once", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		const n = 600
		for i := range n {
			e.unknown(ns, fmt.Sprintf("lead-%04d", i), "n8n LeadCrm exec 1")
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(2)
		go func() { // a person decides some of the keys one by one meanwhile
			defer wg.Done()
			for i := n - 1; i >= 0; i -= 7 {
				_, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: fmt.Sprintf("lead-%04d", i), Resolution: keystore.StateFailed,
					By: "bob", Note: "checked this one by hand"})
				if err != nil && errs.CodeOf(err) != errs.Conflict {
					t.Errorf("single resolve: %v", err)
				}
			}
		}()
		go func() { // live traffic of other keys
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: "orders", Key: fmt.Sprintf("o-%d", i)}); err != nil {
					t.Errorf("reserve during the bulk: %v", err)
					return
				}
			}
		}()
		res := e.bulk(keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: ns, States: []keystore.State{keystore.StateUnknown}},
			Resolution: keystore.StateFailed, By: "ann", Note: "CRM incident", ID: "b-00000002"})
		close(stop)
		wg.Wait()
		skipped := 0
		for _, k := range res.Skipped {
			skipped += k
		}
		if res.Decided+skipped != res.Matched || res.Matched > n {
			t.Fatalf("bulk %+v: decided and skipped do not add up", res)
		}
		// The bulk decides a key once, and never one a person decided
		// before it (that key was no longer unknown); a person may still
		// decide a key again after the bulk, as any failed key.
		bulk := 0
		for i := range n {
			r := e.lookup(ns, fmt.Sprintf("lead-%04d", i)).Record
			var by []string
			for _, h := range r.History {
				if h.Event == keystore.HistoryResolved {
					by = append(by, h.By)
				}
			}
			if r.State != keystore.StateFailed || len(by) == 0 || slices.Index(by, "ann") > 0 || len(by) > 2 {
				t.Fatalf("lead-%04d: %s, decided by %v", i, r.State, by)
			}
			if by[0] == "ann" {
				bulk++
			}
		}
		if bulk != res.Decided {
			t.Fatalf("%d keys were decided by the bulk first, it says it decided %d (%+v)", bulk, res.Decided, res)
		}
	})

	t.Run("a bad bulk request is refused and changes nothing", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		e.unknown(ns, "ord-1", "n8n exec 1")
		before := e.snapshot(ns + "/ord-1")
		some := keystore.Filter{Namespace: ns}
		for name, req := range map[string]keystore.BulkResolveRequest{
			"no person":          {Filter: some, Resolution: keystore.StateFailed, Note: "x"},
			"no note":            {Filter: some, Resolution: keystore.StateFailed, By: "ann"},
			"resolution unknown": {Filter: some, Resolution: keystore.StateUnknown, By: "ann", Note: "x"},
			"final completed":    {Filter: some, Resolution: keystore.StateCompleted, Final: true, By: "ann", Note: "x"},
			"bad state":          {Filter: keystore.Filter{States: []keystore.State{"lost"}}, Resolution: keystore.StateFailed, By: "ann", Note: "x"},
			"id with a comma":    {Filter: some, Resolution: keystore.StateFailed, By: "ann", Note: "x", ID: "a,b"},
			"no selection":       {Resolution: keystore.StateFailed, By: "ann", Note: "x"},
		} {
			_, err := keystore.ResolveMany(e.ctx, e.s, req)
			if errs.CodeOf(err) != errs.InvalidRequest {
				t.Errorf("%s: %v, want invalid_request", name, err)
			}
		}
		if after := e.snapshot(ns + "/ord-1"); after != before {
			t.Fatalf("a refused bulk changed the store")
		}
	})
}
