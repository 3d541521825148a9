package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// A reserve's summary (keystore.ReserveRequest.Summary) is what a person
// reads about the key: kept on the record and on the approval request's
// event, through restarts, listings and every later transition.

func withSummary(s string) func(*keystore.ReserveRequest) {
	return func(r *keystore.ReserveRequest) { r.Summary = s }
}

func runSummary(t *testing.T, newStore New) {
	pol := keystore.Policies{
		Namespaces:   map[string]keystore.NamespacePolicy{gatedNS: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}},
		Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1}},
	}
	const first, second = "Invoice 4711 · 12,000 EUR · ACME", "Invoice 4711 · 12,500 EUR · ACME"

	t.Run("the summary is kept through the key's life and a restart; a duplicate does not change it", func(t *testing.T) {
		e := setup(t, newStore, pol)
		r := e.reserve(ns, "evt_1", withSummary("  "+first+" "))
		if r.Record.Summary != first {
			t.Fatalf("reserve answered summary %q, want %q (trimmed)", r.Record.Summary, first)
		}
		e.complete(ns, "evt_1", r.Token, "crm-1")
		wantOutcome(t, e.reserve(ns, "evt_1", withSummary(second)), keystore.OutcomeDuplicate)
		e.restart()
		if got := e.lookup(ns, "evt_1").Record.Summary; got != first {
			t.Fatalf("lookup after a restart: summary %q, want %q", got, first)
		}
		items := listAll(t, e, keystore.ListQuery{Namespace: ns})
		if len(items) != 1 || items[0].Summary != first {
			t.Fatalf("listing: %+v", items)
		}
		plain := e.reserve(ns, "evt_2")
		if got := e.lookup(ns, "evt_2").Record; got.Summary != "" || plain.Record.Summary != "" {
			t.Fatalf("a reserve without a summary recorded %q", got.Summary)
		}
	})

	t.Run("a retry's summary is the current attempt's; a retry without one keeps it", func(t *testing.T) {
		e := setup(t, newStore, pol)
		r := e.reserve(ns, "evt_1", withSummary(first))
		e.fail(ns, "evt_1", r.Token, keystore.ReasonDestinationFailed)
		r2 := e.reserve(ns, "evt_1", withSummary(second))
		wantOutcome(t, r2, keystore.OutcomeAccepted)
		if got := e.lookup(ns, "evt_1").Record.Summary; got != second {
			t.Fatalf("after a retry with another summary: %q, want %q", got, second)
		}
		e.fail(ns, "evt_1", r2.Token, keystore.ReasonDestinationFailed)
		wantOutcome(t, e.reserve(ns, "evt_1"), keystore.OutcomeAccepted)
		if got := e.lookup(ns, "evt_1").Record.Summary; got != second {
			t.Fatalf("after a retry without a summary: %q, want %q kept", got, second)
		}
	})

	t.Run("a key parked on a paused destination keeps its summary", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		p := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("801"), withSummary(first))
		wantOutcome(t, p, keystore.OutcomeParked)
		e.restart()
		if got := e.lookup(ns, "evt_1").Record.Summary; got != first {
			t.Fatalf("parked key: summary %q, want %q", got, first)
		}
	})

	t.Run("a key awaiting approval keeps the summary it was requested with, and its event carries it", func(t *testing.T) {
		e := setup(t, newStore, pol)
		p := e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("802"), requestedBy("ann"), invoice, withSummary(first))
		wantOutcome(t, p, keystore.OutcomeParked)
		wantOutcome(t, e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("803"), invoice, withSummary(second)), keystore.OutcomeParked)
		e.restart()
		rec := e.lookup(gatedNS, "inv_1").Record
		if rec.Summary != first {
			t.Fatalf("awaiting approval: summary %q, want %q", rec.Summary, first)
		}
		var got []string
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventApprovalRequested && ev.Key == "inv_1" {
				got = append(got, ev.Summary)
			}
		}
		if len(got) != 1 || got[0] != first {
			t.Fatalf("approval_requested events carry %q, want [%q]", got, first)
		}
		if _, err := e.decide(false, "inv_1", "bob", ""); err != nil {
			t.Fatal(err)
		}
		if !e.claimGated("inv_1") {
			t.Fatal("the approved key could not be claimed")
		}
		if _, err := parkStore(t, e).ResumeAnswered(e.ctx, gatedNS, "inv_1", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		// The woken execution's reserve carries no summary, or another
		// one: the key keeps the one the approvers read.
		r := e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("802"), invoice, withSummary("Invoice 4711 · 1 EUR · changed after approval"))
		wantOutcome(t, r, keystore.OutcomeAccepted)
		e.complete(gatedNS, "inv_1", r.Token, "crm-1")
		if got := e.lookup(gatedNS, "inv_1").Record.Summary; got != first {
			t.Fatalf("approved and completed: summary %q, want %q", got, first)
		}
	})

	t.Run("a summary is redacted; one too long, not UTF-8 or with control characters is refused and nothing is recorded", func(t *testing.T) {
		e := setup(t, newStore, pol)
		r := e.reserve(ns, "evt_1", withSummary("Invoice 4711 for ann@example.com"))
		if got := e.lookup(ns, "evt_1").Record.Summary; got != r.Record.Summary || strings.Contains(got, "ann@example.com") || !strings.HasPrefix(got, "Invoice 4711 for ") {
			t.Fatalf("summary stored as %q (answered %q), want the e-mail address masked", got, r.Record.Summary)
		}
		if got := e.reserve(ns, "evt_200", withSummary(strings.Repeat("é", 200))).Record.Summary; got != strings.Repeat("é", 200) {
			t.Fatalf("200 characters (400 bytes) stored as %d characters", len([]rune(got)))
		}
		for name, bad := range map[string]string{"201 characters": strings.Repeat("a", 201), "not UTF-8": "Invoice \xff",
			"a line break": "Invoice 4711\nACME", "a tab": "Invoice\t4711"} {
			rule := map[string]string{"201 characters": "max=200", "not UTF-8": "utf8"}[name]
			if rule == "" {
				rule = "no_control"
			}
			_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_bad", Owner: "n8n exec 1", Summary: bad})
			wantField(t, err, errs.InvalidRequest, "summary", rule)
			if res := e.lookup(ns, "evt_bad"); res.Record != nil {
				t.Fatalf("%s: a refused reserve recorded %+v", name, res.Record)
			}
		}
	})
}
