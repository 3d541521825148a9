package storetest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

const ns = "crm-contacts"

func runTransitions(t *testing.T, newStore New) {
	t.Run("first event", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		wantOutcome(t, r, keystore.OutcomeAccepted)
		if !r.Proceed || r.Token == "" {
			t.Fatalf("accepted must proceed with a token: %+v", r)
		}
		wantState(t, r, keystore.StateReserved)
		if r.Record.Attempt != 1 || r.Record.Owner != "n8n exec 4711" {
			t.Fatalf("attempt/owner = %d/%q", r.Record.Attempt, r.Record.Owner)
		}
		if want := e.clock.Now().Add(keystore.DefaultLease); !r.Record.LeaseExpiresAt.Equal(want) {
			t.Fatalf("lease_expires_at = %v, want %v", r.Record.LeaseExpiresAt, want)
		}
		wantState(t, e.lookup(ns, "evt_1"), keystore.StateReserved)
	})
	t.Run("sequential repeat", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		c := e.complete(ns, "evt_1", r.Token, "crm-contact-789")
		wantOutcome(t, c, keystore.OutcomeCompleted)
		if c.Record.ExpiresAt == nil || !c.Record.ExpiresAt.Equal(e.clock.Now().Add(keystore.DefaultRetention)) {
			t.Fatalf("expires_at = %v, want now + 30 days", c.Record.ExpiresAt)
		}
		d := e.reserve(ns, "evt_1")
		wantOutcome(t, d, keystore.OutcomeDuplicate)
		if d.Proceed || d.Token != "" || !d.Replayed || d.Record.ResultRef != "crm-contact-789" {
			t.Fatalf("duplicate must not proceed, carry no token and replay the result: %+v", d)
		}
		again := e.complete(ns, "evt_1", r.Token, "crm-contact-789")
		wantOutcome(t, again, keystore.OutcomeCompleted)
		if !again.Replayed {
			t.Fatalf("a repeated complete is a replay")
		}
	})
	t.Run("two copies at once", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		e.reserve(ns, "evt_1", func(r *keystore.ReserveRequest) { r.Lease = 120 * time.Second })
		e.clock.Advance(20 * time.Second)
		r := e.reserve(ns, "evt_1")
		wantOutcome(t, r, keystore.OutcomeInProgress)
		if r.Proceed || r.Token != "" || keystore.CeilSeconds(r.RetryAfter) != 100 {
			t.Fatalf("in_progress: proceed=%v token=%q retry_after=%v", r.Proceed, r.Token, r.RetryAfter)
		}
	})
	t.Run("missing key", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		for _, key := range []string{"", "   ", "\t\n", strings.Repeat("k", 256), "lead:anna@example.com", "bad\x01key", string([]byte{0xff, 0xfe})} {
			_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: key})
			wantCode(t, err, errs.InvalidKey)
		}
		_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: "Bad NS", Key: "evt_1"})
		wantCode(t, err, errs.InvalidRequest)
		counts, err := e.s.Counts(e.ctx)
		if err != nil || len(counts) != 0 {
			t.Fatalf("bad input must record nothing: %v %v", counts, err)
		}
		r := e.reserve(ns, "  evt_1  ")
		if r.Record.Key != "evt_1" {
			t.Fatalf("key must be trimmed, got %q", r.Record.Key)
		}
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeInProgress)
	})
	t.Run("same lead with different event ids", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		wantOutcome(t, e.reserve(ns, "evt_1", withPayload(`{"email_hash":"abc"}`)), keystore.OutcomeAccepted)
		wantOutcome(t, e.reserve(ns, "evt_2", withPayload(`{"email_hash":"abc"}`)), keystore.OutcomeAccepted)
		wantOutcome(t, e.reserve("booking-confirmations", "evt_1"), keystore.OutcomeAccepted)
	})
	t.Run("failure after reservation", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		f := e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationFailed)
		wantOutcome(t, f, keystore.OutcomeDestinationFailed)
		wantState(t, f, keystore.StateFailed)
		if !f.Record.Retryable || f.Record.Reason != keystore.ReasonDestinationFailed || f.Record.Message != "HTTP 503 from CRM" {
			t.Fatalf("failed record: %+v", f.Record)
		}
		again := e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationFailed)
		if !again.Replayed || again.Outcome != keystore.OutcomeDestinationFailed {
			t.Fatalf("a repeated fail is a replay: %+v", again)
		}
		r2 := e.reserve(ns, "evt_1")
		wantOutcome(t, r2, keystore.OutcomeAccepted)
		if r2.Record.Attempt != 2 || r2.Token == r.Token || r2.Record.ExpiresAt != nil {
			t.Fatalf("retry must be attempt 2 with a new token and no expiry: %+v", r2.Record)
		}
		_, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_1", Token: r.Token})
		wantCode(t, err, errs.StaleToken)
		wantOutcome(t, e.complete(ns, "evt_1", r2.Token, "crm-1"), keystore.OutcomeCompleted)
	})
	t.Run("failure not retryable", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		wantOutcome(t, e.fail(ns, "evt_1", r.Token, keystore.ReasonValidationFailed), keystore.OutcomeRejected)
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeRejected)
		r2 := e.reserve(ns, "evt_2")
		no := false
		f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_2", Token: r2.Token, Reason: keystore.ReasonDestinationFailed, Retryable: &no})
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, f, keystore.OutcomeRejected)
		wantOutcome(t, e.reserve(ns, "evt_2"), keystore.OutcomeRejected)
	})
	t.Run("timeout / unknown", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		f := e.fail(ns, "evt_1", r.Token, keystore.ReasonOutcomeUnknown)
		wantOutcome(t, f, keystore.OutcomeStateUnknown)
		wantState(t, f, keystore.StateUnknown)
		for i := 0; i < 3; i++ {
			wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeStateUnknown)
		}
		evs := e.events()
		if len(evs) != 1 || evs[0].Kind != keystore.EventKeyUnknown || evs[0].Key != "evt_1" || evs[0].Reason != keystore.ReasonOutcomeUnknown {
			t.Fatalf("events = %+v, want one key_unknown", evs)
		}
	})
	t.Run("late confirmation", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		e.fail(ns, "evt_1", r.Token, keystore.ReasonOutcomeUnknown)
		c := e.complete(ns, "evt_1", r.Token, "mail-42")
		wantOutcome(t, c, keystore.OutcomeCompleted)
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeDuplicate)
	})
	t.Run("stale token", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		before := e.lookup(ns, "evt_1").Record
		for _, tok := range []string{"1.00000000000000000000000000000000", "garbage", r.Token + "x"} {
			_, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_1", Token: tok})
			wantCode(t, err, errs.StaleToken)
			_, err = e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: tok, Reason: keystore.ReasonDestinationFailed})
			wantCode(t, err, errs.StaleToken)
		}
		sameRecord(t, before, e.lookup(ns, "evt_1").Record)
		_, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "nope", Token: r.Token})
		wantCode(t, err, errs.NotFound)
	})
	t.Run("contradictory reports", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		e.complete(ns, "evt_1", r.Token, "crm-1")
		_, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: r.Token, Reason: keystore.ReasonDestinationFailed})
		wantCode(t, err, errs.Conflict)
		r2 := e.reserve(ns, "evt_2")
		e.fail(ns, "evt_2", r2.Token, keystore.ReasonDestinationFailed)
		_, err = e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_2", Token: r2.Token})
		wantCode(t, err, errs.Conflict)
	})
	t.Run("history is bounded", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		var last keystore.Result
		for i := 0; i < 15; i++ {
			r := e.reserve(ns, "evt_1")
			wantOutcome(t, r, keystore.OutcomeAccepted)
			last = e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationFailed)
		}
		h := last.Record.History
		if len(h) != keystore.MaxHistory || h[len(h)-1].Attempt != 15 || h[len(h)-1].Event != "failed" {
			t.Fatalf("history: %d entries, last %+v", len(h), h[len(h)-1])
		}
	})
	t.Run("complete carries result and via", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		c, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_1", Token: r.Token,
			ResultRef: "crm-1", Result: json.RawMessage(`{"id":7}`), Via: keystore.ViaFallback})
		if err != nil {
			t.Fatal(err)
		}
		got := e.lookup(ns, "evt_1").Record
		if got.Via != keystore.ViaFallback || string(got.Result) != `{"id":7}` || c.Record.LeaseExpiresAt != nil {
			t.Fatalf("stored: via=%s result=%s", got.Via, got.Result)
		}
		_, err = e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_1", Token: r.Token, Result: json.RawMessage(`[1]`)})
		wantCode(t, err, errs.InvalidRequest)
		r2 := e.reserve(ns, "evt_2")
		if c := e.complete(ns, "evt_2", r2.Token, "crm-2"); c.Record.Result != nil {
			t.Fatalf("no result sent, result stored: %s", c.Record.Result)
		}
		r5 := e.reserve(ns, "evt_pii")
		f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_pii", Token: r5.Token, Reason: keystore.ReasonValidationFailed,
			Message: "HTTP 422 from the CRM: contact anna.berg@example.com already exists (Authorization: Bearer sk-live-abc)"})
		if err != nil || strings.Contains(f.Record.Message, "anna") || strings.Contains(f.Record.Message, "sk-live") || !strings.Contains(f.Record.Message, "HTTP 422") {
			t.Fatalf("stored message must keep the error, not the personal data: %q %v", f.Record.Message, err)
		}
		r3 := e.reserve(ns, "evt_3")
		c3, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_3", Token: r3.Token, Result: json.RawMessage(`null`)})
		if err != nil || c3.Record.Result != nil {
			t.Fatalf("result null must store no result: %s %v", c3.Record.Result, err)
		}
		// Limits count characters, as the contract says, not bytes.
		r4 := e.reserve(ns, "evt_4", func(q *keystore.ReserveRequest) { q.Owner = strings.Repeat("エ", 128) })
		if _, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_4", Token: r4.Token, Reason: keystore.ReasonDestinationFailed, Message: strings.Repeat("エ", 2000)}); err != nil {
			t.Fatalf("2000 characters of message: %v", err)
		}
		_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_5", Owner: strings.Repeat("エ", 129)})
		wantCode(t, err, errs.InvalidRequest)
	})
}

func withPayload(p string) func(*keystore.ReserveRequest) {
	return func(r *keystore.ReserveRequest) { r.Payload = json.RawMessage(p) }
}

func runFingerprints(t *testing.T, newStore New) {
	e := setup(t, newStore, keystore.Policies{})
	r := e.reserve(ns, "evt_1", withPayload(`{"a": 1, "b": [1, 2.0]}`))
	wantOutcome(t, e.reserve(ns, "evt_1", withPayload(`{"b":[1,2],"a":1.0}`)), keystore.OutcomeInProgress)
	before := e.lookup(ns, "evt_1").Record
	_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_1", Payload: json.RawMessage(`{"a":2}`)})
	wantCode(t, err, errs.KeyReused)
	sameRecord(t, before, e.lookup(ns, "evt_1").Record)
	e.complete(ns, "evt_1", r.Token, "crm-1")
	_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_1", Payload: json.RawMessage(`{"a":2}`)})
	wantCode(t, err, errs.KeyReused)

	e.reserve(ns, "evt_2", func(r *keystore.ReserveRequest) { r.Fingerprint = "sha1:abc" })
	wantOutcome(t, e.reserve(ns, "evt_2", func(r *keystore.ReserveRequest) { r.Fingerprint = "sha1:abc" }), keystore.OutcomeInProgress)
	_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_2", Fingerprint: "sha1:def"})
	wantCode(t, err, errs.KeyReused)
	_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_3", Payload: json.RawMessage(`{"a":`)})
	wantCode(t, err, errs.InvalidRequest)
}

func runLeases(t *testing.T, newStore New) {
	t.Run("lease runs out: unknown", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1", func(r *keystore.ReserveRequest) { r.Lease = 60 * time.Second })
		e.clock.Advance(61 * time.Second)
		u := e.reserve(ns, "evt_1")
		wantOutcome(t, u, keystore.OutcomeStateUnknown)
		wantState(t, e.lookup(ns, "evt_1"), keystore.StateUnknown)
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeStateUnknown)
		if evs := e.events(); len(evs) != 1 || evs[0].Reason != keystore.ReasonLeaseExpired {
			t.Fatalf("events = %+v", evs)
		}
		// The holder's late report still settles it.
		wantOutcome(t, e.complete(ns, "evt_1", r.Token, "crm-1"), keystore.OutcomeCompleted)
	})
	t.Run("lease runs out: reclaim", func(t *testing.T) {
		pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {OnLeaseExpiry: keystore.ExpireReclaim, Lease: 30 * time.Second}}}
		e := setup(t, newStore, pol)
		r := e.reserve(ns, "evt_1")
		if !r.Record.LeaseExpiresAt.Equal(e.clock.Now().Add(30 * time.Second)) {
			t.Fatalf("namespace lease not applied: %v", r.Record.LeaseExpiresAt)
		}
		e.clock.Advance(31 * time.Second)
		r2 := e.reserve(ns, "evt_1")
		wantOutcome(t, r2, keystore.OutcomeAccepted)
		if r2.Record.Attempt != 2 {
			t.Fatalf("attempt = %d", r2.Record.Attempt)
		}
		_, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_1", Token: r.Token})
		wantCode(t, err, errs.StaleToken)
		if st, err := e.s.Sweep(e.ctx); err != nil || st.LeasesExpired != 0 {
			t.Fatalf("sweep must not expire a live reclaimed lease: %+v %v", st, err)
		}
	})
	t.Run("reclaim: a sweep leaves a lapsed lease findable", func(t *testing.T) {
		// Nothing will take the key over until its source sends it again:
		// a person looks for it among the reserved keys and decides on it,
		// one by one or in bulk, after the sweep as before it.
		pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {OnLeaseExpiry: keystore.ExpireReclaim, Lease: 30 * time.Second}}}
		e := setup(t, newStore, pol)
		e.reserve(ns, "evt_1")
		e.reserve(ns, "evt_2")
		e.reserve("other", "evt_3", func(r *keystore.ReserveRequest) { r.Lease = 40 * time.Second })
		e.clock.Advance(41 * time.Second)
		for i := range 2 {
			if st, err := e.s.Sweep(e.ctx); err != nil || st.LeasesExpired != 1-i {
				t.Fatalf("sweep %d: %+v %v; want the other namespace's lease expired once", i+1, st, err)
			}
			wantState(t, e.lookup("other", "evt_3"), keystore.StateUnknown)
			page, err := e.s.List(e.ctx, keystore.ListQuery{Namespace: ns, State: keystore.StateReserved})
			if err != nil || len(page.Items) != 2 {
				t.Fatalf("after sweep %d: reserved keys listed %d, want 2 (%v)", i+1, len(page.Items), err)
			}
			f := keystore.Filter{Namespace: ns, States: []keystore.State{keystore.StateReserved}}
			res, err := e.s.ResolveMany(e.ctx, keystore.BulkResolveRequest{Filter: f, Resolution: keystore.StateFailed, By: "ops", Note: "source gone", DryRun: true})
			if err != nil || res.Matched != 2 || res.Decided != 2 {
				t.Fatalf("after sweep %d: a bulk decision on the reserved keys: %+v %v, want 2 matched and decided", i+1, res, err)
			}
		}
	})
	t.Run("sweeper finds expired leases", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		e.reserve(ns, "evt_1", func(r *keystore.ReserveRequest) { r.Lease = 10 * time.Second })
		e.reserve(ns, "evt_2", func(r *keystore.ReserveRequest) { r.Lease = 100 * time.Second })
		e.clock.Advance(11 * time.Second)
		st, err := e.s.Sweep(e.ctx)
		if err != nil || st.LeasesExpired != 1 {
			t.Fatalf("sweep = %+v, %v; want 1 lease expired", st, err)
		}
		wantState(t, e.lookup(ns, "evt_1"), keystore.StateUnknown)
		wantState(t, e.lookup(ns, "evt_2"), keystore.StateReserved)
		evs := e.events()
		if len(evs) != 1 || evs[0].Key != "evt_1" || evs[0].Kind != keystore.EventKeyUnknown {
			t.Fatalf("events = %+v", evs)
		}
		if more, _ := e.s.Events(e.ctx, evs[0].Seq, 10); len(more) != 0 {
			t.Fatalf("events after the last seq: %+v", more)
		}
	})
}

func runResolve(t *testing.T, newStore New) {
	e := setup(t, newStore, keystore.Policies{})
	resolve := func(key string, to keystore.State, force bool) (keystore.Result, error) {
		return e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: to,
			By: "office manager", Note: "checked the Sent folder: mail went out", ResultRef: "mail-1", Force: force})
	}
	r := e.reserve(ns, "evt_1")
	e.fail(ns, "evt_1", r.Token, keystore.ReasonOutcomeUnknown)
	res, err := resolve("evt_1", keystore.StateCompleted, false)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, res, keystore.OutcomeCompleted)
	rec := res.Record
	if rec.ResolvedBy != "office manager" || rec.ResolvedAt == nil || rec.Note == "" || rec.ResultRef != "mail-1" {
		t.Fatalf("resolved record: %+v", rec)
	}
	if h := rec.History[len(rec.History)-1]; h.Event != keystore.HistoryResolved || h.By != "office manager" {
		t.Fatalf("history: %+v", h)
	}
	// The key_resolved event, written with the resolution, tells notify.
	evs := e.events()
	if ev := evs[len(evs)-1]; ev.Kind != keystore.EventKeyResolved || ev.Key != "evt_1" || ev.Attempt != 1 ||
		ev.Owner != "office manager" || ev.Message != string(keystore.StateCompleted) {
		t.Fatalf("last event after a resolution: %+v", ev)
	}
	wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeDuplicate)

	r = e.reserve(ns, "evt_2")
	e.fail(ns, "evt_2", r.Token, keystore.ReasonValidationFailed)
	res, err = resolve("evt_2", keystore.StateFailed, false)
	if err != nil || res.Record.State != keystore.StateFailed || !res.Record.Retryable {
		t.Fatalf("resolve to failed: %+v %v", res.Record, err)
	}
	r2 := e.reserve(ns, "evt_2")
	wantOutcome(t, r2, keystore.OutcomeAccepted)
	if r2.Record.Attempt != 2 {
		t.Fatalf("attempt = %d", r2.Record.Attempt)
	}
	_, err = resolve("evt_2", keystore.StateCompleted, false)
	wantCode(t, err, errs.Conflict) // reserved, lease live
	if _, err = resolve("evt_2", keystore.StateCompleted, true); err != nil {
		t.Fatalf("force: %v", err)
	}
	_, err = resolve("evt_2", keystore.StateFailed, false)
	wantCode(t, err, errs.Conflict) // completed stays completed
	_, err = resolve("nope", keystore.StateCompleted, false)
	wantCode(t, err, errs.NotFound)
	_, err = e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: keystore.StateCompleted, Note: "x"})
	wantCode(t, err, errs.InvalidRequest)
	_, err = e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: "maybe", By: "a", Note: "x"})
	wantCode(t, err, errs.InvalidRequest)
}

// listAll follows the cursor to the end of a listing.
func listAll(t *testing.T, e *env, q keystore.ListQuery) []*keystore.Record {
	t.Helper()
	var out []*keystore.Record
	for pages := 0; ; pages++ {
		p, err := e.s.List(e.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items...)
		if p.NextCursor == "" {
			return out
		}
		if pages > 100 {
			t.Fatal("cursor never ends")
		}
		q.Cursor = p.NextCursor
	}
}

func runListings(t *testing.T, newStore New) {
	e := setup(t, newStore, keystore.Policies{})
	for i := 0; i < 7; i++ {
		key := fmt.Sprintf("evt_%02d", i)
		r := e.reserve(ns, key)
		switch i % 3 {
		case 0:
			e.fail(ns, key, r.Token, keystore.ReasonOutcomeUnknown)
		case 1:
			e.complete(ns, key, r.Token, "ref")
		}
	}
	e.reserve("other", "evt_x")
	// Walk the unknown queue two at a time, and the reserved keys one at a
	// time: every key once, none of another state or namespace.
	for _, tc := range []struct {
		state keystore.State
		limit int
		want  []string
	}{
		{keystore.StateUnknown, 2, []string{"evt_00", "evt_03", "evt_06"}},
		{keystore.StateReserved, 1, []string{"evt_02", "evt_05"}},
		{keystore.StateReserved, 100, []string{"evt_02", "evt_05"}},
	} {
		var got []string
		for _, r := range listAll(t, e, keystore.ListQuery{Namespace: ns, State: tc.state, Limit: tc.limit}) {
			if r.State != tc.state || r.Namespace != ns {
				t.Fatalf("%s listing returned %s/%s in state %s", tc.state, r.Namespace, r.Key, r.State)
			}
			got = append(got, r.Key)
		}
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%s (limit %d) = %v, want %v", tc.state, tc.limit, got, tc.want)
		}
	}
	all, err := e.s.List(e.ctx, keystore.ListQuery{Namespace: ns, Limit: 100})
	if err != nil || len(all.Items) != 7 || all.NextCursor != "" {
		t.Fatalf("all of %s: %d items, cursor %q, %v", ns, len(all.Items), all.NextCursor, err)
	}
	done, err := e.s.List(e.ctx, keystore.ListQuery{State: keystore.StateCompleted})
	if err != nil || len(done.Items) != 2 {
		t.Fatalf("completed: %d, %v", len(done.Items), err)
	}
	counts, err := e.s.Counts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[keystore.State]int{keystore.StateUnknown: 3, keystore.StateCompleted: 2, keystore.StateReserved: 2}
	if fmt.Sprint(counts[ns]) != fmt.Sprint(want) || counts["other"][keystore.StateReserved] != 1 {
		t.Fatalf("counts = %v", counts)
	}
	for _, c := range []string{"!!", "garbage", "Z2FyYmFnZQ"} {
		if _, err := e.s.List(e.ctx, keystore.ListQuery{Cursor: c}); err == nil {
			t.Fatalf("cursor %q must be refused", c)
		}
	}
}

func runRetention(t *testing.T, newStore New) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Retention: time.Hour}}}
	e := setup(t, newStore, pol)
	r := e.reserve(ns, "evt_1")
	e.complete(ns, "evt_1", r.Token, "ref")
	r = e.reserve(ns, "evt_2")
	e.fail(ns, "evt_2", r.Token, keystore.ReasonValidationFailed)
	r = e.reserve(ns, "evt_3")
	e.fail(ns, "evt_3", r.Token, keystore.ReasonOutcomeUnknown) // unknown: kept until a person decides
	e.clock.Advance(30 * time.Minute)
	if st, _ := e.s.Sweep(e.ctx); st.Expired != 0 {
		t.Fatalf("swept too early: %+v", st)
	}
	e.clock.Advance(31 * time.Minute)
	st, err := e.s.Sweep(e.ctx)
	if err != nil || st.Expired != 2 {
		t.Fatalf("sweep = %+v, %v; want 2 expired", st, err)
	}
	wantOutcome(t, e.lookup(ns, "evt_1"), keystore.OutcomeAbsent)
	wantOutcome(t, e.lookup(ns, "evt_2"), keystore.OutcomeAbsent)
	wantState(t, e.lookup(ns, "evt_3"), keystore.StateUnknown)
	counts, _ := e.s.Counts(e.ctx)
	if fmt.Sprint(counts[ns]) != fmt.Sprint(map[keystore.State]int{keystore.StateUnknown: 1}) {
		t.Fatalf("counts after sweep = %v", counts)
	}
	e.clock.Advance(keystore.EventRetention)
	if st, _ := e.s.Sweep(e.ctx); st.Events != 1 {
		t.Fatalf("old events not swept: %+v", st)
	}
}

func withDest(d string) func(*keystore.ReserveRequest) {
	return func(r *keystore.ReserveRequest) { r.Destination = d }
}

func breaker(t *testing.T, e *env, dest string) keystore.Breaker {
	t.Helper()
	bs, err := e.s.Destinations(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Destination == dest {
			return b
		}
	}
	return keystore.Breaker{Destination: dest, State: keystore.BreakerClosed}
}

func runBreakers(t *testing.T, newStore New) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1}}}
	t.Run("unreachable opens at once with unreachable_threshold 1, paused reserves record nothing", func(t *testing.T) {
		e := setup(t, newStore, pol)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed {
			t.Fatalf("configured destination must be listed closed: %+v", b)
		}
		done := e.reserve(ns, "evt_done", withDest("hubspot"))
		e.complete(ns, "evt_done", done.Token, "crm-0")
		r := e.reserve(ns, "evt_1", withDest("hubspot"))
		f := e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationUnreachable)
		wantOutcome(t, f, keystore.OutcomeDestinationFailed)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen || b.ReopensAt == nil {
			t.Fatalf("breaker = %+v, want open", b)
		}
		for i := 0; i < 5; i++ {
			p := e.reserve(ns, fmt.Sprintf("evt_p%d", i), withDest("hubspot"))
			wantOutcome(t, p, keystore.OutcomeDestinationPaused)
			if p.Proceed || keystore.CeilSeconds(p.RetryAfter) != 60 {
				t.Fatalf("paused: %+v", p)
			}
			if p.Namespace != ns || p.Key != fmt.Sprintf("evt_p%d", i) {
				t.Fatalf("a paused answer must name its key: %q/%q", p.Namespace, p.Key)
			}
			if a := e.lookup(ns, fmt.Sprintf("  evt_p%d ", i)); a.Outcome != keystore.OutcomeAbsent || a.Key != fmt.Sprintf("evt_p%d", i) {
				t.Fatalf("absent lookup: %+v", a)
			}
		}
		// A retry of the failed key is paused too; a key that is done is
		// still answered as done (nothing would be written anyway).
		wantOutcome(t, e.reserve(ns, "evt_1", withDest("hubspot")), keystore.OutcomeDestinationPaused)
		wantOutcome(t, e.reserve(ns, "evt_done", withDest("hubspot")), keystore.OutcomeDuplicate)
		wantOutcome(t, e.reserve(ns, "evt_other"), keystore.OutcomeAccepted) // no destination: not gated
		if b := breaker(t, e, "hubspot"); b.PausedReserves != 6 {
			t.Fatalf("paused_reserves = %d, want 6", b.PausedReserves)
		}
		e.clock.Advance(61 * time.Second)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerHalfOpen {
			t.Fatalf("after cooldown the breaker shows half_open, got %s", b.State)
		}
		probe := e.reserve(ns, "evt_p0", withDest("hubspot"))
		wantOutcome(t, probe, keystore.OutcomeAccepted)
		wantOutcome(t, e.reserve(ns, "evt_p1", withDest("hubspot")), keystore.OutcomeDestinationPaused)
		e.complete(ns, "evt_p0", probe.Token, "crm-1")
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed || b.PausedReserves != 0 {
			t.Fatalf("after the probe's complete: %+v", b)
		}
		var kinds []string
		for _, ev := range e.events() {
			kinds = append(kinds, fmt.Sprintf("%s:%d", ev.Kind, ev.PausedReserves))
		}
		if fmt.Sprint(kinds) != "[breaker_opened:0 breaker_closed:7]" {
			t.Fatalf("events = %v", kinds)
		}
	})
	t.Run("consecutive failures open, a failed probe re-opens quietly", func(t *testing.T) {
		e := setup(t, newStore, pol)
		for i := 0; i < 3; i++ {
			if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed {
				t.Fatalf("opened after %d failures", i)
			}
			key := fmt.Sprintf("evt_%d", i)
			r := e.reserve(ns, key, withDest("hubspot"))
			reason := keystore.ReasonDestinationFailed
			if i == 1 {
				reason = keystore.ReasonOutcomeUnknown
			}
			e.fail(ns, key, r.Token, reason)
		}
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen || b.ConsecutiveFailures != 3 {
			t.Fatalf("breaker = %+v, want open after 3", b)
		}
		e.clock.Advance(time.Minute)
		probe := e.reserve(ns, "evt_0", withDest("hubspot"))
		wantOutcome(t, probe, keystore.OutcomeAccepted)
		e.fail(ns, "evt_0", probe.Token, keystore.ReasonDestinationFailed)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen {
			t.Fatalf("failed probe must re-open: %+v", b)
		}
		opened := 0
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventBreakerOpened {
				opened++
			}
		}
		if opened != 1 {
			t.Fatalf("breaker_opened events = %d, want 1 for one outage", opened)
		}
	})
	t.Run("a success resets the count", func(t *testing.T) {
		e := setup(t, newStore, pol)
		for i := 0; i < 5; i++ {
			key := fmt.Sprintf("evt_%d", i)
			r := e.reserve(ns, key, withDest("hubspot"))
			if i%2 == 0 {
				e.fail(ns, key, r.Token, keystore.ReasonDestinationFailed)
			} else {
				e.complete(ns, key, r.Token, "ok")
			}
		}
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed || b.ConsecutiveFailures != 1 {
			t.Fatalf("breaker = %+v", b)
		}
	})
	t.Run("single probe under 50 concurrent reserves", func(t *testing.T) {
		e := setup(t, newStore, pol)
		r := e.reserve(ns, "evt_0", withDest("hubspot"))
		e.fail(ns, "evt_0", r.Token, keystore.ReasonDestinationUnreachable)
		e.clock.Advance(time.Minute)
		var accepted, paused atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: fmt.Sprintf("evt_c%d", i), Destination: "hubspot"})
				if err != nil {
					t.Error(err)
					return
				}
				switch res.Outcome {
				case keystore.OutcomeAccepted:
					accepted.Add(1)
				case keystore.OutcomeDestinationPaused:
					paused.Add(1)
				}
			}(i)
		}
		wg.Wait()
		if accepted.Load() != 1 || paused.Load() != 49 {
			t.Fatalf("accepted %d paused %d, want exactly one probe", accepted.Load(), paused.Load())
		}
	})
	t.Run("distinct keys open it; one key failing again and again does not, across a restart", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{}) // nobody configured shared-pay: the default thresholds
		failAgain := func(key string, reason keystore.Reason) {
			t.Helper()
			r := e.reserve(ns, key, withDest("shared-pay"))
			wantOutcome(t, r, keystore.OutcomeAccepted)
			e.fail(ns, key, r.Token, reason)
		}
		for i := 0; i < keystore.DefaultFailureThreshold+1; i++ {
			failAgain("evt_same", keystore.ReasonDestinationUnreachable)
			failAgain("evt_same", keystore.ReasonDestinationFailed)
			if i == 1 {
				e.restart() // the counted keys are the store's, not the process's
			}
		}
		if b := breaker(t, e, "shared-pay"); b.State != keystore.BreakerClosed || b.ConsecutiveFailures != 1 {
			t.Fatalf("one key failing %d times: breaker %+v, want closed with 1 failure", 2*keystore.DefaultFailureThreshold+2, b)
		}
		failAgain("evt_other", keystore.ReasonDestinationUnreachable)
		if b := breaker(t, e, "shared-pay"); b.State != keystore.BreakerOpen || b.ConsecutiveFailures != keystore.DefaultUnreachableThreshold {
			t.Fatalf("a second key unreachable: breaker %+v, want open after %d keys", b, keystore.DefaultUnreachableThreshold)
		}
		wantOutcome(t, e.reserve(ns, "evt_next", withDest("shared-pay")), keystore.OutcomeDestinationPaused)
	})
	t.Run("distinct keys across namespaces count toward the failure threshold", func(t *testing.T) {
		e := setup(t, newStore, pol)
		for i, n := range []string{ns, "billing", ns} {
			key := "evt_shared"
			if i == 2 {
				key = "evt_2"
			}
			r := e.reserve(n, key, withDest("hubspot"))
			e.fail(n, key, r.Token, keystore.ReasonDestinationFailed)
		}
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen || b.ConsecutiveFailures != 3 {
			t.Fatalf("three keys (one name in two namespaces): breaker %+v, want open after 3", b)
		}
	})
	t.Run("a destination limited to namespaces refuses the others, recording nothing", func(t *testing.T) {
		limited := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"shared-pay": {}}}
		e := setup(t, newStore, limited)
		// billing's key, reserved before the operator limited shared-pay.
		legacy := e.reserve("billing", "evt_legacy", withDest("shared-pay"))
		limited.Destinations["shared-pay"] = keystore.DestinationPolicy{UnreachableThreshold: 1, Namespaces: []string{ns}}
		e.restart()
		before := e.lookup("billing", "evt_legacy").Record

		_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: "billing", Key: "evt_new", Destination: "shared-pay"})
		wantCode(t, err, errs.Forbidden)
		wantOutcome(t, e.lookup("billing", "evt_new"), keystore.OutcomeAbsent)
		_, err = e.s.Fail(e.ctx, keystore.FailRequest{Namespace: "billing", Key: "evt_legacy", Token: legacy.Token, Reason: keystore.ReasonDestinationUnreachable})
		wantCode(t, err, errs.Forbidden)
		sameRecord(t, before, e.lookup("billing", "evt_legacy").Record)
		if b := breaker(t, e, "shared-pay"); b.State != keystore.BreakerClosed || b.ConsecutiveFailures != 0 {
			t.Fatalf("after the refused failure: breaker %+v, want closed and untouched", b)
		}
		if evs := e.events(); len(evs) != 0 {
			t.Fatalf("refusals wrote events: %+v", evs)
		}

		// The namespace that may use it opens it with its evidence.
		r := e.reserve(ns, "evt_1", withDest("shared-pay"))
		e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationUnreachable)
		if b := breaker(t, e, "shared-pay"); b.State != keystore.BreakerOpen {
			t.Fatalf("%s's unreachable with unreachable_threshold 1: breaker %+v, want open", ns, b)
		}
	})
	t.Run("restart while open", func(t *testing.T) {
		e := setup(t, newStore, pol)
		r := e.reserve(ns, "evt_0", withDest("hubspot"))
		e.fail(ns, "evt_0", r.Token, keystore.ReasonDestinationUnreachable)
		e.restart()
		wantOutcome(t, e.reserve(ns, "evt_1", withDest("hubspot")), keystore.OutcomeDestinationPaused)
	})
}

func runConcurrency(t *testing.T, newStore New) {
	e := setup(t, newStore, keystore.Policies{})
	const goroutines, rounds = 100, 50
	for round := 0; round < rounds; round++ {
		key := fmt.Sprintf("evt_round_%d", round)
		accepted := e.raceCopies(t, ns, key, goroutines)
		if n := accepted; n != 1 {
			t.Fatalf("round %d: %d copies accepted, want exactly 1", round, n)
		}
	}
}

func runRestart(t *testing.T, newStore New) {
	e := setup(t, newStore, keystore.Policies{})
	r := e.reserve(ns, "evt_1")
	e.complete(ns, "evt_1", r.Token, "crm-1")
	r2 := e.reserve(ns, "evt_2")
	e.restart()
	d := e.reserve(ns, "evt_1")
	wantOutcome(t, d, keystore.OutcomeDuplicate)
	if d.Record.ResultRef != "crm-1" {
		t.Fatalf("result_ref after restart = %q", d.Record.ResultRef)
	}
	wantOutcome(t, e.reserve(ns, "evt_2"), keystore.OutcomeInProgress)
	wantOutcome(t, e.complete(ns, "evt_2", r2.Token, "crm-2"), keystore.OutcomeCompleted)
}

func runEdgeCases(t *testing.T, newStore New) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1}}}
	t.Run("records read back exactly as answered", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		check := func(r keystore.Result) {
			t.Helper()
			sameRecord(t, r.Record, e.lookup(ns, r.Record.Key).Record)
		}
		e.clock.Advance(1500 * time.Microsecond) // off the millisecond grid
		r := e.reserve(ns, "evt_rt", withDest("hubspot"), withPayload(`{"a":1}`))
		check(r)
		e.clock.Advance(2*time.Second + 300*time.Microsecond)
		check(e.fail(ns, "evt_rt", r.Token, keystore.ReasonOutcomeUnknown))
		e.clock.Advance(1700 * time.Microsecond)
		res, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_rt", Resolution: keystore.StateFailed, By: "office manager", Note: "not sent"})
		if err != nil {
			t.Fatal(err)
		}
		check(res)
		r2 := e.reserve(ns, "evt_rt", withDest("hubspot"), func(q *keystore.ReserveRequest) { q.Owner = "n8n exec 4712" })
		check(r2)
		c, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_rt", Token: r2.Token,
			ResultRef: "crm-9", Result: json.RawMessage(`{"id":9}`), Via: keystore.ViaFallback})
		if err != nil {
			t.Fatal(err)
		}
		check(c)
		e.restart()
		check(c)
	})
	t.Run("a stale report changes nothing, not even the breaker", func(t *testing.T) {
		e := setup(t, newStore, pol)
		r0 := e.reserve(ns, "evt_0", withDest("hubspot"))
		e.fail(ns, "evt_0", r0.Token, keystore.ReasonDestinationFailed)
		r1 := e.reserve(ns, "evt_1", withDest("hubspot"))
		e.fail(ns, "evt_1", r1.Token, keystore.ReasonDestinationFailed)
		wantOutcome(t, e.reserve(ns, "evt_1", withDest("hubspot")), keystore.OutcomeAccepted)
		_, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_1", Token: r1.Token, ResultRef: "x"})
		wantCode(t, err, errs.StaleToken)
		_, err = e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: r1.Token, Reason: keystore.ReasonDestinationUnreachable})
		wantCode(t, err, errs.StaleToken)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed || b.ConsecutiveFailures != 2 {
			t.Fatalf("stale reports moved the breaker: %+v", b)
		}
	})
	t.Run("a straggler's success does not close an open breaker", func(t *testing.T) {
		e := setup(t, newStore, pol)
		old := e.reserve(ns, "evt_old", withDest("hubspot"))
		r := e.reserve(ns, "evt_1", withDest("hubspot"))
		e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationUnreachable)
		e.complete(ns, "evt_old", old.Token, "crm-1")
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen {
			t.Fatalf("breaker = %+v, want still open", b)
		}
		wantOutcome(t, e.reserve(ns, "evt_2", withDest("hubspot")), keystore.OutcomeDestinationPaused)
	})
	t.Run("validation_failed breaks a run of failures", func(t *testing.T) {
		e := setup(t, newStore, pol)
		for i, reason := range []keystore.Reason{keystore.ReasonDestinationFailed, keystore.ReasonDestinationFailed,
			keystore.ReasonValidationFailed, keystore.ReasonDestinationFailed} {
			key := fmt.Sprintf("evt_%d", i)
			r := e.reserve(ns, key, withDest("hubspot"))
			wantOutcome(t, r, keystore.OutcomeAccepted)
			e.fail(ns, key, r.Token, reason)
		}
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed || b.ConsecutiveFailures != 1 {
			t.Fatalf("breaker = %+v, want closed with 1 failure", b)
		}
	})
	t.Run("a repeated fail that contradicts retryable is a conflict", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_1")
		e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationFailed)
		no := false
		_, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: r.Token, Reason: keystore.ReasonDestinationFailed, Retryable: &no})
		wantCode(t, err, errs.Conflict)
		if rec := e.lookup(ns, "evt_1").Record; !rec.Retryable {
			t.Fatalf("record changed: %+v", rec)
		}
	})
	t.Run("in half_open only the probe's report moves the breaker", func(t *testing.T) {
		e := setup(t, newStore, pol)
		old := e.reserve(ns, "evt_old", withDest("hubspot"), func(r *keystore.ReserveRequest) { r.Lease = time.Hour })
		r := e.reserve(ns, "evt_1", withDest("hubspot"))
		e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationUnreachable)
		e.clock.Advance(61 * time.Second)
		probe := e.reserve(ns, "evt_probe", withDest("hubspot"))
		wantOutcome(t, probe, keystore.OutcomeAccepted)
		e.fail(ns, "evt_old", old.Token, keystore.ReasonDestinationFailed) // a request sent before the outage
		e.complete(ns, "evt_probe", probe.Token, "crm-1")
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed {
			t.Fatalf("the probe's complete must close the breaker: %+v", b)
		}
	})
	t.Run("strings that cannot be stored are refused", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_1", Owner: "exec \xff", Lease: time.Second})
		wantCode(t, err, errs.InvalidRequest)
		r := e.reserve(ns, "evt_2")
		_, err = e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_2", Token: r.Token, Reason: keystore.ReasonDestinationFailed, Message: "bad \xff"})
		wantCode(t, err, errs.InvalidRequest)
		e.clock.Advance(time.Hour)
		if _, err := e.s.Sweep(e.ctx); err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if _, err := e.s.List(e.ctx, keystore.ListQuery{Namespace: ns}); err != nil {
			t.Fatalf("list: %v", err)
		}
	})
}

// A clock that steps back (NTP) must not lose a time on disk.
func runClockStepsBack(t *testing.T, newStore New) {
	e := setup(t, newStore, keystore.Policies{})
	r := e.reserve(ns, "evt_1")
	e.clock.Advance(-time.Millisecond)
	res, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: keystore.StateCompleted, By: "ops", Note: "checked", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	got := e.lookup(ns, "evt_1").Record
	if got.ResolvedAt == nil || !got.ResolvedAt.Equal(*res.Record.ResolvedAt) || !got.UpdatedAt.Equal(res.Record.UpdatedAt) {
		t.Fatalf("times lost after a clock step back: resolved_at %v updated_at %v (token %s)", got.ResolvedAt, got.UpdatedAt, r.Token[:2])
	}
}

// raceCopies sends copies reserves of one key at the same instant and
// returns how many were accepted; any outcome but accepted or in_progress
// is an error.
func (e *env) raceCopies(t *testing.T, ns, key string, copies int) int32 {
	reqs := make([]keystore.ReserveRequest, copies)
	for i := range reqs {
		reqs[i] = keystore.ReserveRequest{Namespace: ns, Key: key, Owner: "copy"}
	}
	return e.raceReserves(t, reqs)
}

// raceReserves sends the reserves at the same instant and returns how
// many were accepted; any outcome but accepted or in_progress is an error.
func (e *env) raceReserves(t *testing.T, reqs []keystore.ReserveRequest) int32 {
	var accepted atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := e.s.Reserve(e.ctx, req)
			if err != nil {
				t.Error(err)
				return
			}
			switch res.Outcome {
			case keystore.OutcomeAccepted:
				accepted.Add(1)
			case keystore.OutcomeInProgress:
			default:
				t.Errorf("%s: unexpected outcome %s", req.Owner, res.Outcome)
			}
		}()
	}
	close(start)
	wg.Wait()
	return accepted.Load()
}
