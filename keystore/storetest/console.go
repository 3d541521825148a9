package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The operator console's questions: search by key prefix and owner, the
// unknown keys oldest first, the hourly activity, a person's reset of a
// breaker and a resolution to failed for good.

func keysOf(items []*keystore.Record) []string {
	out := make([]string, len(items))
	for i, r := range items {
		out[i] = r.Namespace + "/" + r.Key
	}
	return out
}

// unknown reserves key as owner and reports outcome_unknown.
func (e *env) unknown(ns, key, owner string) {
	e.t.Helper()
	r := e.reserve(ns, key, func(q *keystore.ReserveRequest) { q.Owner = owner })
	e.fail(ns, key, r.Token, keystore.ReasonOutcomeUnknown)
}

func runConsole(t *testing.T, newStore New) {
	t.Run("search by key prefix stays in its namespace and pages", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		for i := range 7 {
			e.reserve(ns, fmt.Sprintf("bk-%02d", i))
		}
		e.reserve(ns, "bk_x") // _ is no wildcard
		e.reserve(ns, "bl-01")
		e.reserve("other", "bk-01")
		got := keysOf(listAll(t, e, keystore.ListQuery{Namespace: ns, KeyPrefix: "bk-", Limit: 3}))
		want := []string{ns + "/bk-00", ns + "/bk-01", ns + "/bk-02", ns + "/bk-03", ns + "/bk-04", ns + "/bk-05", ns + "/bk-06"}
		if !slices.Equal(got, want) {
			t.Fatalf("prefix bk-: %v, want %v", got, want)
		}
		if got := keysOf(listAll(t, e, keystore.ListQuery{Namespace: ns, KeyPrefix: "bk_"})); !slices.Equal(got, []string{ns + "/bk_x"}) {
			t.Fatalf("prefix bk_: %v", got)
		}
		if got := keysOf(listAll(t, e, keystore.ListQuery{Namespace: ns, KeyPrefix: "bk-0", State: keystore.StateCompleted})); len(got) != 0 {
			t.Fatalf("prefix with state completed: %v", got)
		}
		_, err := e.s.List(e.ctx, keystore.ListQuery{KeyPrefix: "bk-"})
		wantCode(t, err, errs.InvalidRequest)
	})

	t.Run("search by owner finds failed and unknown keys, and with state reserved the attempts in flight", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		e.unknown(ns, "evt_1", "n8n exec 7")
		e.unknown("other", "evt_2", "n8n exec 7")
		done := e.reserve(ns, "evt_3", func(q *keystore.ReserveRequest) { q.Owner = "n8n exec 7" })
		e.complete(ns, "evt_3", done.Token, "crm-3")
		e.reserve(ns, "evt_4", func(q *keystore.ReserveRequest) { q.Owner = "n8n exec 8" })
		rejected := e.reserve(ns, "evt_6", func(q *keystore.ReserveRequest) { q.Owner = "n8n exec 6" })
		e.fail(ns, "evt_6", rejected.Token, keystore.ReasonValidationFailed)
		// A new attempt by someone else moves the key to its new owner.
		moved := e.reserve(ns, "evt_5", func(q *keystore.ReserveRequest) { q.Owner = "n8n exec 7" })
		e.fail(ns, "evt_5", moved.Token, keystore.ReasonDestinationFailed)
		e.reserve(ns, "evt_5", func(q *keystore.ReserveRequest) { q.Owner = "n8n exec 9" })
		for _, c := range []struct {
			q    keystore.ListQuery
			want []string
		}{
			{keystore.ListQuery{Owner: "n8n exec 7"}, []string{ns + "/evt_1", "other/evt_2"}},
			{keystore.ListQuery{Owner: "n8n exec 7", Limit: 1}, []string{ns + "/evt_1", "other/evt_2"}},
			{keystore.ListQuery{Owner: "n8n exec 7", Namespace: ns}, []string{ns + "/evt_1"}},
			{keystore.ListQuery{Owner: "n8n exec 7", State: keystore.StateUnknown}, []string{ns + "/evt_1", "other/evt_2"}},
			{keystore.ListQuery{Owner: "n8n exec 7", State: keystore.StateFailed}, nil},
			{keystore.ListQuery{Owner: "n8n exec 7", State: keystore.StateReserved}, nil},
			{keystore.ListQuery{Owner: "n8n exec 8", State: keystore.StateReserved, Namespace: ns, KeyPrefix: "evt_4"}, []string{ns + "/evt_4"}},
			{keystore.ListQuery{Owner: "n8n exec 8", State: keystore.StateReserved, Namespace: ns, KeyPrefix: "evt_5"}, nil},
			{keystore.ListQuery{Owner: "n8n exec 8"}, nil}, // reserved only
			{keystore.ListQuery{Owner: "n8n exec 9", State: keystore.StateReserved}, []string{ns + "/evt_5"}},
			{keystore.ListQuery{Owner: "n8n exec 9", State: keystore.StateReserved, Limit: 1}, []string{ns + "/evt_5"}},
			{keystore.ListQuery{Owner: "n8n exec 6", State: keystore.StateFailed}, []string{ns + "/evt_6"}},
			{keystore.ListQuery{Owner: "n8n exec 6"}, []string{ns + "/evt_6"}},
			{keystore.ListQuery{Owner: "n8n exec"}, nil},
		} {
			sort := keysOf(listAll(t, e, c.q))
			slices.Sort(sort)
			if !slices.Equal(sort, c.want) {
				t.Errorf("%+v: %v, want %v", c.q, sort, c.want)
			}
		}
		_, err := e.s.List(e.ctx, keystore.ListQuery{Owner: "n8n exec 7", State: keystore.StateCompleted})
		wantCode(t, err, errs.InvalidRequest)
	})

	t.Run("unknown keys oldest first, pages, and leave the queue when resolved", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		for _, key := range []string{"evt_c", "evt_a", "evt_d", "evt_b"} {
			e.unknown(ns, key, "n8n exec 1")
			e.clock.Advance(time.Second)
		}
		e.reserve(ns, "evt_live") // reserved: not waiting
		q := keystore.ListQuery{State: keystore.StateUnknown, Oldest: true, Limit: 3}
		if got := keysOf(listAll(t, e, q)); !slices.Equal(got, []string{ns + "/evt_c", ns + "/evt_a", ns + "/evt_d", ns + "/evt_b"}) {
			t.Fatalf("oldest first: %v", got)
		}
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_a", Resolution: keystore.StateCompleted,
			By: "office manager", Note: "found it"}); err != nil {
			t.Fatal(err)
		}
		e.restart()
		if got := keysOf(listAll(t, e, q)); !slices.Equal(got, []string{ns + "/evt_c", ns + "/evt_d", ns + "/evt_b"}) {
			t.Fatalf("after resolving evt_a: %v", got)
		}
		_, err := e.s.List(e.ctx, keystore.ListQuery{State: keystore.StateFailed, Oldest: true})
		wantCode(t, err, errs.InvalidRequest)
	})

	t.Run("activity counts each hour's outcomes, duplicates included, across a restart", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		hour1 := e.clock.Now().Truncate(time.Hour)
		for i := range 3 {
			r := e.reserve(ns, fmt.Sprintf("evt_%d", i))
			e.complete(ns, fmt.Sprintf("evt_%d", i), r.Token, "")
		}
		wantOutcome(t, e.reserve(ns, "evt_0"), keystore.OutcomeDuplicate)
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeDuplicate)
		e.clock.Advance(time.Hour)
		hour2 := hour1.Add(time.Hour)
		f := e.reserve(ns, "evt_f")
		e.fail(ns, "evt_f", f.Token, keystore.ReasonDestinationFailed)
		e.reserve(ns, "evt_f")        // a new attempt: accepted
		e.unknown(ns, "evt_u", "n8n") // accepted, then unknown
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_u", Resolution: keystore.StateFailed,
			By: "office manager", Note: "never sent"}); err != nil {
			t.Fatal(err) // a person's decision: not counted
		}
		wantOutcome(t, e.reserve(ns, "evt_2"), keystore.OutcomeDuplicate)
		want := []keystore.HourActivity{
			{Hour: hour1, Accepted: 3, Duplicate: 2},
			{Hour: hour2, Accepted: 3, Duplicate: 1, Failed: 1, Unknown: 1},
		}
		check := func(when string) {
			t.Helper()
			got, err := e.s.Activity(e.ctx, hour1.Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, func(a, b keystore.HourActivity) bool {
				return a.Hour.Equal(b.Hour) && a.Accepted == b.Accepted && a.Duplicate == b.Duplicate && a.Failed == b.Failed && a.Unknown == b.Unknown
			}) {
				t.Fatalf("%s: activity %+v, want %+v", when, got, want)
			}
			got, err = e.s.Activity(e.ctx, hour2)
			if err != nil || len(got) != 1 || !got[0].Hour.Equal(hour2) {
				t.Fatalf("%s: since the second hour: %+v %v", when, got, err)
			}
		}
		check("before a sweep")
		if _, err := e.s.Sweep(e.ctx); err != nil {
			t.Fatal(err)
		}
		check("after a sweep")
		wantOutcome(t, e.reserve(ns, "evt_0"), keystore.OutcomeDuplicate)
		want[1].Duplicate++
		e.restart()
		check("after a restart")
	})

	t.Run("a person resets an open breaker with a reason; who and why are kept and logged", func(t *testing.T) {
		pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Hour, FailureThreshold: 3, UnreachableThreshold: 1}}}
		e := setup(t, newStore, pol)
		_, err := e.s.ResetBreaker(e.ctx, "hubspot", "office manager", "CRM confirmed fixed")
		wantCode(t, err, errs.NotFound) // never touched: nothing to reset
		r := e.reserve(ns, "evt_1", withDest("hubspot"))
		e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationUnreachable)
		wantOutcome(t, e.reserve(ns, "evt_2", withDest("hubspot")), keystore.OutcomeDestinationPaused)
		_, err = e.s.ResetBreaker(e.ctx, "hubspot", " ", "CRM confirmed fixed")
		wantCode(t, err, errs.InvalidRequest)
		_, err = e.s.ResetBreaker(e.ctx, "hubspot", "office manager", " \n ")
		wantCode(t, err, errs.InvalidRequest)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen || b.Reset != nil {
			t.Fatalf("a refused reset changed the breaker: %+v", b)
		}
		b, err := e.s.ResetBreaker(e.ctx, "hubspot", "office manager", " CRM confirmed fixed ")
		if err != nil || b.State != keystore.BreakerClosed || b.Reset == nil || b.Reset.Reason != "CRM confirmed fixed" {
			t.Fatalf("reset: %+v %v", b, err)
		}
		e.restart()
		b = breaker(t, e, "hubspot")
		if b.State != keystore.BreakerClosed || b.ConsecutiveFailures != 0 || b.Reset == nil ||
			b.Reset.By != "office manager" || b.Reset.Reason != "CRM confirmed fixed" || b.Reset.At.IsZero() {
			t.Fatalf("after reset and restart: %+v (reset %+v)", b, b.Reset)
		}
		r2 := e.reserve(ns, "evt_2", withDest("hubspot"))
		wantOutcome(t, r2, keystore.OutcomeAccepted)
		if b := breaker(t, e, "hubspot"); b.Reset == nil {
			t.Fatalf("a reserve through the reset breaker forgot the reset: %+v", b)
		}
		evs := e.events()
		last := evs[len(evs)-1]
		if last.Kind != keystore.EventBreakerClosed || last.Destination != "hubspot" || last.PausedReserves != 1 ||
			last.Message != "reset by office manager because CRM confirmed fixed" {
			t.Fatalf("last event %+v, want the reset's breaker_closed", last)
		}
		if by, why, ok := keystore.ResetOf(last); !ok || by != "office manager" || why != "CRM confirmed fixed" {
			t.Fatalf("ResetOf(last) = %q, %q, %v", by, why, ok)
		}
		n := len(evs)
		if _, err := e.s.ResetBreaker(e.ctx, "hubspot", "office manager", "again"); err != nil {
			t.Fatal(err)
		}
		if len(e.events()) != n {
			t.Fatal("resetting a closed breaker logged an event")
		}
		// The next outage forgets the reset: it no longer says why writes flow.
		e.fail(ns, "evt_2", r2.Token, keystore.ReasonDestinationUnreachable)
		e.restart()
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen || b.Reset != nil {
			t.Fatalf("reopened breaker still shows the old reset: %+v", b)
		}
	})

	t.Run("resolved failed for good: the next reserve is rejected", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		e.unknown(ns, "evt_1", "n8n exec 1")
		res, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: keystore.StateFailed,
			Final: true, By: "office manager", Note: "customer cancelled"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Record.State != keystore.StateFailed || res.Record.Retryable {
			t.Fatalf("resolved: state %s retryable %v", res.Record.State, res.Record.Retryable)
		}
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeRejected)
		_, err = e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: keystore.StateCompleted,
			Final: true, By: "office manager", Note: "x"})
		wantCode(t, err, errs.InvalidRequest)
	})
}
