package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Parked keys by the start of their wait (keystore/wait.go): the longest
// waiting first, by destination, namespace and stage, up to a time, page
// after page; an event that parks anew in a rolling outage keeps its
// place of its first parking.

func byWait(t *testing.T, e *env, q keystore.WaitQuery) []string {
	t.Helper()
	recs, err := e.s.ParkedByWait(e.ctx, q)
	if err != nil {
		t.Fatalf("%+v: %v", q, err)
	}
	var keys []string
	for _, r := range recs {
		if !q.Keeps(r) {
			t.Errorf("%+v answered %s/%s (%s, %s, since %v), which it does not select", q, r.Namespace, r.Key, r.Destination, keystore.StageOf(r), r.WaitingSince())
		}
		keys = append(keys, r.Namespace+"/"+r.Key)
	}
	return keys
}

func wantKeys(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

func runWaits(t *testing.T, newStore New) {
	const billing = "billing"
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1},
		"salesforce": {UnreachableThreshold: 1}}}
	t.Run("parked keys by the start of their wait: oldest first, by destination, namespace and stage, up to a time", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		r := e.reserve(ns, "evt_sf", withDest("salesforce"))
		wantOutcome(t, e.fail(ns, "evt_sf", r.Token, keystore.ReasonDestinationUnreachable), keystore.OutcomeDestinationFailed)
		if r := e.reserve(billing, "evt_first", withDest("hubspot")); r.Outcome == keystore.OutcomeAccepted {
			e.fail(billing, "evt_first", r.Token, keystore.ReasonDestinationUnreachable)
		}
		start := e.clock.Now()
		for _, p := range []struct{ space, key, dest string }{{ns, "a", "hubspot"}, {billing, "b", "hubspot"}, {ns, "c", "salesforce"}, {ns, "d", "hubspot"}} {
			wantOutcome(t, e.reserve(p.space, p.key, withDest(p.dest), withResume(p.key)), keystore.OutcomeParked)
			e.clock.Advance(time.Second)
		}
		// a is hubspot's probe, and n8n no longer holds its execution.
		e.clock.Advance(time.Minute)
		if !claim(t, e, "a") {
			t.Fatal("claim of a refused")
		}
		if _, err := e.s.ResumeAnswered(e.ctx, ns, "a", *e.lookup(ns, "a").Record.ParkedAt, keystore.ResumeLost, "HTTP 404"); err != nil {
			t.Fatal(err)
		}
		a, b, c, d := ns+"/a", billing+"/b", ns+"/c", ns+"/d"
		for round := range 2 {
			wantKeys(t, "every parked key", byWait(t, e, keystore.WaitQuery{}), a, b, c, d)
			wantKeys(t, "hubspot's", byWait(t, e, keystore.WaitQuery{Destination: "hubspot"}), a, b, d)
			wantKeys(t, "billing's", byWait(t, e, keystore.WaitQuery{Namespace: billing}), b)
			wantKeys(t, "all but billing's", byWait(t, e, keystore.WaitQuery{Except: []string{billing}}), a, c, d)
			wantKeys(t, "the queued ones", byWait(t, e, keystore.WaitQuery{Stages: keystore.QueuedStages}), b, c, d)
			wantKeys(t, "the lost ones", byWait(t, e, keystore.WaitQuery{Stages: []keystore.Stage{keystore.PhaseLost}}), a)
			wantKeys(t, "hubspot's queued ones of crm-contacts", byWait(t, e, keystore.WaitQuery{Destination: "hubspot", Namespace: ns, Stages: keystore.QueuedStages}), d)
			wantKeys(t, "waiting since the third parking or before", byWait(t, e, keystore.WaitQuery{Until: start.Add(2 * time.Second)}), a, b, c)
			wantKeys(t, "waiting since just before the third parking", byWait(t, e, keystore.WaitQuery{Until: start.Add(2*time.Second - time.Millisecond)}), a, b)
			wantKeys(t, "hubspot's waiting since before anything parked", byWait(t, e, keystore.WaitQuery{Destination: "hubspot", Until: start.Add(-time.Second)}))
			if round == 0 {
				e.restart()
			}
		}
		// A key that leaves parking leaves the listing.
		wantOutcome(t, e.reserve(ns, "zzz", withDest("salesforce"), withResume("z")), keystore.OutcomeParked)
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "c", Resolution: keystore.StateCompleted, Force: true, By: "Ana", Note: "written by hand"}); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, "salesforce's after c was resolved", byWait(t, e, keystore.WaitQuery{Destination: "salesforce"}), ns+"/zzz")
		for _, q := range []keystore.WaitQuery{{Destination: "Bad NS"}, {Namespace: "Bad NS"}, {Except: []string{"Bad NS"}}, {Stages: []keystore.Stage{keystore.StageGranted}}} {
			if _, err := e.s.ParkedByWait(e.ctx, q); errs.CodeOf(err) != errs.InvalidRequest {
				t.Errorf("%+v: %v, want invalid_request", q, err)
			}
		}
	})
	t.Run("an event that parks anew in a rolling outage keeps the place of its first parking", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		first := *e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1")).Record.ParkedAt
		e.clock.Advance(10 * time.Second)
		wantOutcome(t, e.reserve(ns, "evt_2", withDest("hubspot"), withResume("2")), keystore.OutcomeParked)
		// The cooldown ends, evt_1 is the probe, n8n wakes its execution,
		// whose write finds the destination still down and parks again.
		e.clock.Advance(time.Minute)
		if !claim(t, e, "evt_1") {
			t.Fatal("claim of evt_1 refused")
		}
		if _, err := e.s.ResumeAnswered(e.ctx, ns, "evt_1", first, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		r := e.reserve(ns, "evt_1", withDest("hubspot"))
		wantOutcome(t, r, keystore.OutcomeAccepted)
		f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: r.Token, Reason: keystore.ReasonDestinationUnreachable, ResumeURL: resumeBase + "3"})
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, f, keystore.StateParked)
		if !f.Record.ParkedAt.After(first.Add(10 * time.Second)) {
			t.Fatalf("parked anew at %v, want after evt_2's parking", f.Record.ParkedAt)
		}
		for round := range 2 {
			wantKeys(t, "hubspot's", byWait(t, e, keystore.WaitQuery{Destination: "hubspot"}), ns+"/evt_1", ns+"/evt_2")
			wantKeys(t, "waiting since the first parking", byWait(t, e, keystore.WaitQuery{Until: first, Stages: keystore.QueuedStages}), ns+"/evt_1")
			if round == 0 {
				e.restart()
			}
		}
	})
	t.Run("page after page, keys parked at the same time by namespace and key", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		var want []string
		for i, k := range []string{"k1", "k2", "k4", "k3", "k5"} {
			wantOutcome(t, e.reserve(ns, k, withDest("hubspot"), withResume(k)), keystore.OutcomeParked)
			if i != 2 { // k4 and k3 park at the same time
				e.clock.Advance(time.Second)
			}
			want = append(want, ns+"/"+k)
		}
		want[2], want[3] = ns+"/k3", ns+"/k4"
		for _, dest := range []string{"", "hubspot"} {
			var got []string
			q := keystore.WaitQuery{Destination: dest, Limit: 2}
			for pages := 0; ; pages++ {
				recs, err := e.s.ParkedByWait(e.ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					got = append(got, r.Namespace+"/"+r.Key)
				}
				if len(recs) < q.Limit || pages > 5 {
					break
				}
				q = q.Next(recs[len(recs)-1])
			}
			wantKeys(t, "page after page of "+dest, got, want...)
		}
	})
}
