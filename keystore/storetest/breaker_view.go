package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// One namespace's failures pause that namespace's writes only
// (keystore/breaker_view.go), as a store keeps it across calls and a
// restart: the views are stored with the breaker, and every store reads
// back what it wrote.
func runBreakerViews(t *testing.T, newStore New) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"shared": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 2},
		"mine":   {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 2, Namespaces: []string{"crm-contacts"}}}}
	const crm, pay = "crm-contacts", "payments"
	failNew := func(e *env, n, key, dest string) keystore.Result {
		e.t.Helper()
		r := e.reserve(n, key, withDest(dest))
		wantOutcome(e.t, r, keystore.OutcomeAccepted)
		return e.fail(n, key, r.Token, keystore.ReasonDestinationUnreachable)
	}
	written := func(e *env, n, key, dest string) {
		e.t.Helper()
		r := e.reserve(n, key, withDest(dest))
		wantOutcome(e.t, r, keystore.OutcomeAccepted)
		e.complete(n, key, r.Token, "ok-"+key)
	}
	t.Run("one namespace's invented failures pause it alone, a second namespace's agreement pauses all", func(t *testing.T) {
		e := setup(t, newStore, pol)
		written(e, pay, "pay-0", "shared") // payments writes through it
		failNew(e, crm, "invented-1", "shared")
		failNew(e, crm, "invented-2", "shared")
		e.restart() // the views are stored, not remembered
		b := breaker(t, e, "shared")
		if b.State != keystore.BreakerClosed || len(b.Views) != 1 || b.Views[0].Namespace != crm || b.Views[0].State != keystore.BreakerOpen {
			t.Fatalf("after crm's two failures: %+v, want closed with crm's view open", b)
		}
		p := e.reserve(crm, "invented-3", withDest("shared"))
		wantOutcome(t, p, keystore.OutcomeDestinationPaused)
		if p.PausedFor != keystore.PausedNamespace || keystore.CeilSeconds(p.RetryAfter) != 60 {
			t.Fatalf("crm's reserve: paused_for %q, retry %s; want namespace, 60 s", p.PausedFor, p.RetryAfter)
		}
		crmOpened := *b.Views[0].OpenedAt
		e.clock.Advance(30 * time.Second)
		pr := e.reserve(pay, "pay-1", withDest("shared"))
		wantOutcome(t, pr, keystore.OutcomeAccepted)
		// payments fails too: two namespaces agree, open for everyone.
		e.fail(pay, "pay-1", pr.Token, keystore.ReasonDestinationUnreachable)
		if b := breaker(t, e, "shared"); b.State != keystore.BreakerOpen || len(b.Views) != 0 {
			t.Fatalf("after payments failed too: %+v, want open for all", b)
		}
		// The outage began when crm's own breaker opened, not now.
		if b := breaker(t, e, "shared"); b.OpenedAt == nil || !b.OpenedAt.Equal(crmOpened) {
			t.Fatalf("open for all since %v, want since crm's own breaker opened, %v", b.OpenedAt, crmOpened)
		}
		p = e.reserve("bookings", "b-1", withDest("shared"))
		wantOutcome(t, p, keystore.OutcomeDestinationPaused)
		if p.PausedFor != "" {
			t.Fatalf("a pause for every namespace says paused_for %q", p.PausedFor)
		}
		opened := 0
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventBreakerOpened && ev.Destination == "shared" {
				opened++
			}
		}
		if opened != 1 {
			t.Fatalf("%d breaker_opened events, want 1: the opening for every namespace", opened)
		}
	})
	t.Run("a view probes for its namespace alone and closes on its probe's success", func(t *testing.T) {
		e := setup(t, newStore, pol)
		written(e, pay, "pay-0", "shared")
		failNew(e, crm, "c-1", "shared")
		failNew(e, crm, "c-2", "shared")
		e.clock.Advance(61 * time.Second)
		if b := breaker(t, e, "shared"); len(b.Views) != 1 || b.Views[0].State != keystore.BreakerHalfOpen {
			t.Fatalf("after the cooldown: %+v, want crm's view half open", b)
		}
		probe := e.reserve(crm, "c-3", withDest("shared"))
		wantOutcome(t, probe, keystore.OutcomeAccepted)
		wantOutcome(t, e.reserve(crm, "c-4", withDest("shared")), keystore.OutcomeDestinationPaused)
		wantOutcome(t, e.reserve(pay, "pay-2", withDest("shared")), keystore.OutcomeAccepted)
		// The probe fails: another cooldown for crm alone.
		e.fail(crm, "c-3", probe.Token, keystore.ReasonDestinationUnreachable)
		if b := breaker(t, e, "shared"); b.State != keystore.BreakerClosed || len(b.Views) != 1 || b.Views[0].State != keystore.BreakerOpen {
			t.Fatalf("after the probe failed: %+v", b)
		}
		e.clock.Advance(61 * time.Second)
		probe = e.reserve(crm, "c-4", withDest("shared"))
		wantOutcome(t, probe, keystore.OutcomeAccepted)
		e.complete(crm, "c-4", probe.Token, "crm-4")
		if b := breaker(t, e, "shared"); b.State != keystore.BreakerClosed || len(b.Views) != 0 {
			t.Fatalf("after the probe got through: %+v, want closed without views", b)
		}
		wantOutcome(t, e.reserve(crm, "c-5", withDest("shared")), keystore.OutcomeAccepted)
	})
	t.Run("a namespace paused alone parks and catches up through its own probe", func(t *testing.T) {
		e := setup(t, newStore, pol)
		ps := parkStore(t, e)
		claimOK := func(key string) bool {
			t.Helper()
			_, ok, err := ps.ClaimResume(e.ctx, crm, key, 30*time.Second)
			if err != nil {
				t.Fatalf("claim %s: %v", key, err)
			}
			return ok
		}
		written(e, pay, "pay-0", "shared")
		failNew(e, crm, "c-1", "shared")
		r := e.reserve(crm, "c-2", withDest("shared"))
		f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: crm, Key: "c-2", Token: r.Token, Reason: keystore.ReasonDestinationUnreachable, ResumeURL: resumeBase + "2"})
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, f, keystore.OutcomeParked) // the failure that paused crm parks its key
		p := e.reserve(crm, "c-3", withDest("shared"), withResume("3"))
		wantOutcome(t, p, keystore.OutcomeParked)
		if keystore.CeilSeconds(p.RetryAfter) != 60 {
			t.Fatalf("parked alone: retry after %s, want crm's cooldown, 60 s", p.RetryAfter)
		}
		if claimOK("c-2") {
			t.Fatal("a key of a namespace paused alone was claimed during its cooldown")
		}
		wantOutcome(t, e.reserve(pay, "pay-1", withDest("shared")), keystore.OutcomeAccepted)
		e.clock.Advance(61 * time.Second)
		if !claimOK("c-2") {
			t.Fatal("after crm's cooldown its oldest parked key was not claimed as its probe")
		}
		if claimOK("c-3") {
			t.Fatal("a second key of crm was claimed while its probe is out")
		}
		parked := e.lookup(crm, "c-2").Record.ParkedAt
		if _, err := ps.ResumeAnswered(e.ctx, crm, "c-2", *parked, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		probe := e.reserve(crm, "c-2", withDest("shared")) // the woken execution
		wantOutcome(t, probe, keystore.OutcomeAccepted)
		e.complete(crm, "c-2", probe.Token, "crm-2")
		if b := breaker(t, e, "shared"); b.State != keystore.BreakerClosed || len(b.Views) != 0 {
			t.Fatalf("after crm's probe got through: %+v", b)
		}
		if !claimOK("c-3") {
			t.Fatal("crm's next parked key was not claimed once its probe got through")
		}
	})
	t.Run("the only namespace of a destination pauses it for all", func(t *testing.T) {
		e := setup(t, newStore, pol)
		// Configured as crm's alone.
		failNew(e, crm, "c-1", "mine")
		failNew(e, crm, "c-2", "mine")
		if b := breaker(t, e, "mine"); b.State != keystore.BreakerOpen {
			t.Fatalf("a destination limited to crm alone: %+v, want open", b)
		}
		// Not configured, and no other namespace reserved through it.
		failNew(e, crm, "c-1", "shared")
		failNew(e, crm, "c-2", "shared")
		if b := breaker(t, e, "shared"); b.State != keystore.BreakerOpen {
			t.Fatalf("a destination only crm used: %+v, want open", b)
		}
	})
	t.Run("a breaker one namespace opened alone narrows to it when another namespace reserves", func(t *testing.T) {
		e := setup(t, newStore, pol)
		// crm is the first to use the destination and fails two keys: as
		// its only known user, it pauses it for all.
		failNew(e, crm, "c-1", "shared")
		failNew(e, crm, "c-2", "shared")
		if b := breaker(t, e, "shared"); b.State != keystore.BreakerOpen {
			t.Fatalf("a destination only crm used: %+v, want open", b)
		}
		e.restart()
		// payments reserves through it: the breaker was crm's evidence
		// alone, so it narrows to crm's view and payments writes.
		written(e, pay, "pay-1", "shared")
		b := breaker(t, e, "shared")
		if b.State != keystore.BreakerClosed || len(b.Views) != 1 || b.Views[0].Namespace != crm || b.Views[0].State != keystore.BreakerOpen {
			t.Fatalf("after payments' reserve: %+v, want closed with crm's view open", b)
		}
		p := e.reserve(crm, "c-3", withDest("shared"))
		wantOutcome(t, p, keystore.OutcomeDestinationPaused)
		if p.PausedFor != keystore.PausedNamespace || keystore.CeilSeconds(p.RetryAfter) != 60 {
			t.Fatalf("crm after the narrowing: %+v, want paused for its namespace until its cooldown ends", p)
		}
		var kinds []keystore.EventKind
		for _, ev := range e.events() {
			if ev.Destination == "shared" {
				kinds = append(kinds, ev.Kind)
				if strings.Contains(ev.Message, crm) {
					t.Errorf("the event log, every team's, names crm: %+v", ev)
				}
			}
		}
		if fmt.Sprint(kinds) != "[breaker_opened breaker_narrowed]" {
			t.Fatalf("events %v, want the opening for all and its narrowing", kinds)
		}
		// A person's hold is never narrowed.
		if _, err := e.s.HoldDestination(e.ctx, "shared", "ops", "ERP upgrade", e.clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, e.reserve("bookings", "b-1", withDest("shared")), keystore.OutcomeDestinationPaused)
		wantOutcome(t, e.reserve(pay, "pay-2", withDest("shared")), keystore.OutcomeDestinationPaused)
	})
	t.Run("a maintenance hold pauses every namespace", func(t *testing.T) {
		e := setup(t, newStore, pol)
		written(e, pay, "pay-0", "shared")
		failNew(e, crm, "c-1", "shared")
		failNew(e, crm, "c-2", "shared")
		b, err := e.s.HoldDestination(e.ctx, "shared", "ops", "CRM upgrade", e.clock.Now().Add(time.Hour))
		if err != nil || b.State != keystore.BreakerOpen || len(b.Views) != 0 {
			t.Fatalf("hold: %+v %v", b, err)
		}
		for _, n := range []string{crm, pay, "bookings"} {
			p := e.reserve(n, "after-hold", withDest("shared"))
			wantOutcome(t, p, keystore.OutcomeDestinationPaused)
			if p.PausedFor != "" {
				t.Fatalf("%s under a hold: paused_for %q, want every namespace", n, p.PausedFor)
			}
		}
	})
	t.Run("a person's reset closes the views too", func(t *testing.T) {
		e := setup(t, newStore, pol)
		written(e, pay, "pay-0", "shared")
		failNew(e, crm, "c-1", "shared")
		failNew(e, crm, "c-2", "shared")
		b, err := e.s.ResetBreaker(e.ctx, "shared", "ana", "crm's key generator was wrong, fixed")
		if err != nil || b.State != keystore.BreakerClosed || len(b.Views) != 0 {
			t.Fatalf("reset: %+v %v", b, err)
		}
		wantOutcome(t, e.reserve(crm, "c-3", withDest("shared")), keystore.OutcomeAccepted)
	})
}
