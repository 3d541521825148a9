package storetest

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The parked phases (keystore/phase.go) as each store reads them: a key in
// every phase, and the store's queue (ParkedByWait of QueuedStages), its
// counts (ParkedCounts, WokenCounts) and its parked listing agree with
// keystore.PhaseOf, before and after a restart. The stores state "which
// parked keys wait for the catch-up" in their own terms (bbolt's
// idx/parked and idx/waits, PostgreSQL's SQL and stage column); this is
// where both are held to the one definition.

func runPhases(t *testing.T, newStore New) {
	pol := keystore.Policies{
		Namespaces:   map[string]keystore.NamespacePolicy{gatedNS: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}},
		Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1}},
	}
	t.Run("the queue and the counts agree with every parked phase", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		for _, k := range []string{"k_probe", "k_claimed", "k_resumed", "k_lost", "k_waiting"} {
			wantOutcome(t, e.reserve(ns, k, withDest("hubspot"), withResume(k)), keystore.OutcomeParked)
			e.clock.Advance(time.Second)
		}
		for _, k := range []string{"g_awaiting", "g_approved", "g_rejected"} {
			wantOutcome(t, e.reserve(gatedNS, k, withDest("hubspot"), withResume(k), requestedBy("ann"), withPayload(`{"invoice":"`+k+`"}`)), keystore.OutcomeParked)
		}
		if _, err := e.decide(false, "g_approved", "bob", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.decide(true, "g_rejected", "bob", "duplicate"); err != nil {
			t.Fatal(err)
		}
		answer := func(key string, a keystore.ResumeAnswer) {
			t.Helper()
			if _, err := parkStore(t, e).ResumeAnswered(e.ctx, ns, key, *e.lookup(ns, key).Record.ParkedAt, a, "test"); err != nil {
				t.Fatal(err)
			}
		}
		e.clock.Advance(time.Minute)
		if !claim(t, e, "k_probe") {
			t.Fatal("the oldest key could not probe")
		}
		if p := keystore.PhaseWith(e.lookup(ns, "k_probe").Record, ptrTo(breaker(t, e, "hubspot"))); p != keystore.PhaseProbe {
			t.Fatalf("k_probe is %s, want probe", p)
		}
		agree(t, e, map[string]keystore.ParkedPhase{ // the probe is a claimed key to the queue
			"k_probe": keystore.PhaseClaimed, "k_claimed": keystore.PhaseWaiting, "k_resumed": keystore.PhaseWaiting, "k_lost": keystore.PhaseWaiting, "k_waiting": keystore.PhaseWaiting,
			"g_awaiting": keystore.PhaseAwaitingApproval, "g_approved": keystore.PhaseApproved, "g_rejected": keystore.PhaseRejected,
		})
		// The probe is woken and completes: the breaker closes, the rest
		// can be claimed.
		answer("k_probe", keystore.ResumeAccepted)
		a := e.reserve(ns, "k_probe", withDest("hubspot"))
		wantOutcome(t, a, keystore.OutcomeAccepted)
		wantOutcome(t, e.complete(ns, "k_probe", a.Token, "crm-1"), keystore.OutcomeCompleted)
		for _, k := range []string{"k_claimed", "k_resumed", "k_lost"} {
			if !claim(t, e, k) {
				t.Fatalf("claim %s refused", k)
			}
		}
		answer("k_resumed", keystore.ResumeAccepted)
		answer("k_lost", keystore.ResumeLost)
		want := map[string]keystore.ParkedPhase{
			"k_claimed": keystore.PhaseClaimed, "k_resumed": keystore.PhaseResumed, "k_lost": keystore.PhaseLost, "k_waiting": keystore.PhaseWaiting,
			"g_awaiting": keystore.PhaseAwaitingApproval, "g_approved": keystore.PhaseApproved, "g_rejected": keystore.PhaseRejected,
		}
		agree(t, e, maps.Clone(want))
		e.restart()
		agree(t, e, want)
	})
}

func ptrTo(b keystore.Breaker) *keystore.Breaker { return &b }

// agree checks that every parked key of the store is in the phase want
// names (by key) and that the store's queue and counts hold exactly the
// keys their phase puts there: the queue and ParkedCounts the waiting and
// claimed ones, WokenCounts the resumed ones.
func agree(t *testing.T, e *env, want map[string]keystore.ParkedPhase) {
	t.Helper()
	var queued, woken []string
	for _, r := range listAll(t, e, keystore.ListQuery{State: keystore.StateParked}) {
		p := keystore.PhaseOf(r)
		if w, ok := want[r.Key]; !ok || p != w {
			t.Fatalf("%s is %q, want %q", r.Key, p, w)
		}
		switch p {
		case keystore.PhaseWaiting, keystore.PhaseClaimed:
			queued = append(queued, r.Key)
		case keystore.PhaseResumed:
			woken = append(woken, r.Key)
		}
		delete(want, r.Key)
	}
	if len(want) > 0 {
		t.Fatalf("not listed as parked: %v", want)
	}
	ps := parkStore(t, e)
	rs, err := ps.ParkedByWait(e.ctx, queue("hubspot"))
	if err != nil {
		t.Fatal(err)
	}
	var inQueue []string
	for _, r := range rs {
		inQueue = append(inQueue, r.Key)
	}
	sort.Strings(queued)
	sort.Strings(inQueue)
	if strings.Join(inQueue, " ") != strings.Join(queued, " ") {
		t.Errorf("the store's queue holds %v, the phases say %v", inQueue, queued)
	}
	parked, err := ps.ParkedCounts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wokenCounts, err := ps.WokenCounts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, wantCounts := fmt.Sprintf("parked %d woken %d", parked["hubspot"], wokenCounts["hubspot"]), fmt.Sprintf("parked %d woken %d", len(queued), len(woken)); got != wantCounts {
		t.Errorf("the store counts %s, the phases say %s", got, wantCounts)
	}
}
