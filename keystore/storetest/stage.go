package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The stage of a key (keystore/stage.go): every kind of write leaves the
// stage StageOf gives its record, in the record the store answers, the one
// it reads back and its stage index (KeysAtStage), across a restart.

func runStages(t *testing.T, newStore New) {
	pol := keystore.Policies{
		Namespaces: map[string]keystore.NamespacePolicy{gatedNS: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}},
		Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1},
			"salesforce": {Cooldown: time.Minute, UnreachableThreshold: 1}},
	}
	const exec42 = "n8n wf1 exec 42"
	gate := func(r *keystore.ReserveRequest) { r.Rerun, r.Owner = true, exec42 }
	t.Run("each kind of write leaves the stage its fields say, in the record and in the index", func(t *testing.T) {
		e := setup(t, newStore, pol)
		tokens := map[string]string{}
		ok := func(r keystore.Result, err error) keystore.Result {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		yes := func(done bool, err error) {
			t.Helper()
			if err != nil || !done {
				t.Fatalf("%v %v", done, err)
			}
		}
		grant := func(key string) {
			ok(e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "back"}))
		}
		answer := func(space, key string, a keystore.ResumeAnswer) {
			t.Helper()
			if _, err := e.s.ResumeAnswered(e.ctx, space, key, *e.lookup(space, key).Record.ParkedAt, a, "test"); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			name    string
			space   string
			key     string
			write   func()
			want    keystore.Stage
			restart bool
		}{
			{name: "reserve", key: "r1", write: func() {
				tokens["r1"] = e.reserve(ns, "r1", func(r *keystore.ReserveRequest) { r.Owner = exec42 }).Token
			}},
			{name: "fail, retryable", key: "r1", write: func() { e.fail(ns, "r1", tokens["r1"], keystore.ReasonDestinationFailed) }},
			{name: "the gate's reserve", key: "r1", write: func() { e.reserve(ns, "r1", gate) }, want: keystore.StageAtGate, restart: true},
			{name: "an acknowledgement keeps the stage", key: "r1", write: func() {
				ok(e.s.Acknowledge(e.ctx, keystore.AckRequest{Namespace: ns, Key: "r1", Event: keystore.HistoryAcknowledged, By: "Ana"}))
			}, want: keystore.StageAtGate},
			{name: "a person allows the re-run", key: "r1", write: func() { grant("r1") }, want: keystore.StageGranted, restart: true},
			{name: "a guard claims it", key: "r1", write: func() {
				yes(claimed(e.s.ClaimRerunHeld(e.ctx, ns, "r1", "guard-a", time.Minute, 10*time.Minute)))
			}, want: keystore.StageStarting},
			{name: "n8n refuses it", key: "r1", write: func() {
				yes(e.s.NoteRerun(e.ctx, ns, "r1", keystore.HistoryRerunRefused, "HTTP 404"))
			}, want: keystore.StageRefused},
			{name: "allowed again", key: "r1", write: func() { grant("r1") }, want: keystore.StageGranted},
			{name: "claimed again", key: "r1", write: func() {
				yes(claimed(e.s.ClaimRerunHeld(e.ctx, ns, "r1", "guard-a", time.Minute, 10*time.Minute)))
			}, want: keystore.StageStarting},
			{name: "n8n starts it", key: "r1", write: func() {
				yes(e.s.NoteRerun(e.ctx, ns, "r1", keystore.HistoryRerunStarted, "57"))
			}, want: keystore.StageStarted, restart: true},
			{name: "the re-run's gate reserves", key: "r1", write: func() {
				wantOutcome(t, e.reserve(ns, "r1", func(r *keystore.ReserveRequest) { r.Rerun, r.Owner = true, "n8n wf1 exec 57" }), keystore.OutcomeAccepted)
			}},
			{name: "a bulk decision allows a re-run", key: "b1", write: func() {
				tok := e.reserve(ns, "b1", func(r *keystore.ReserveRequest) { r.Owner = exec42 }).Token
				e.fail(ns, "b1", tok, keystore.ReasonDestinationFailed)
				wantOutcome(t, e.reserve(ns, "b1", gate), keystore.OutcomeRerunNotGranted)
				e.check(ns, "b1", keystore.StageAtGate)
				res := e.bulk(keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: ns, KeyPrefix: "b"}, Resolution: keystore.StateFailed,
					Rerun: true, By: "Ana", Note: "all of them"})
				if res.Decided != 1 {
					t.Fatalf("bulk: %+v", res)
				}
			}, want: keystore.StageGranted},
			{name: "a person resolves it without re-run", key: "b1", write: func() {
				ok(e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "b1", Resolution: keystore.StateFailed, Final: true, By: "Ana", Note: "done by hand"}))
			}},
			{name: "a paused reserve parks", key: "p1", write: func() {
				openHubspot(t, e)
				wantOutcome(t, e.reserve(ns, "p1", withDest("hubspot"), withResume("101")), keystore.OutcomeParked)
			}, want: keystore.PhaseWaiting, restart: true},
			{name: "the probe's claim", key: "p1", write: func() {
				e.clock.Advance(time.Minute)
				if !claim(t, e, "p1") {
					t.Fatal("claim refused")
				}
			}, want: keystore.PhaseClaimed},
			{name: "n8n woke it", key: "p1", write: func() { answer(ns, "p1", keystore.ResumeAccepted) }, want: keystore.PhaseResumed},
			{name: "the woken execution reserves", key: "p1", write: func() {
				wantOutcome(t, e.reserve(ns, "p1", withDest("hubspot")), keystore.OutcomeAccepted)
			}},
			{name: "a parked key n8n lost", key: "p2", write: func() {
				r := e.reserve(ns, "evt_sf", withDest("salesforce"))
				wantOutcome(t, e.fail(ns, "evt_sf", r.Token, keystore.ReasonDestinationUnreachable), keystore.OutcomeDestinationFailed)
				wantOutcome(t, e.reserve(ns, "p2", withDest("salesforce"), withResume("102")), keystore.OutcomeParked)
				e.clock.Advance(time.Minute)
				if !claim(t, e, "p2") {
					t.Fatal("claim refused")
				}
				answer(ns, "p2", keystore.ResumeLost)
			}, want: keystore.PhaseLost},
			{name: "a gated reserve", space: gatedNS, key: "g1", write: func() {
				wantOutcome(t, e.reserve(gatedNS, "g1", withDest("hubspot"), withResume("201"), requestedBy("ann"), invoice), keystore.OutcomeParked)
			}, want: keystore.PhaseAwaitingApproval, restart: true},
			{name: "approved", space: gatedNS, key: "g1", write: func() { ok(e.decide(false, "g1", "bob", "")) }, want: keystore.PhaseApproved},
			{name: "a second gated reserve", space: gatedNS, key: "g2", write: func() {
				wantOutcome(t, e.reserve(gatedNS, "g2", withDest("hubspot"), withResume("202"), requestedBy("ann"), invoice), keystore.OutcomeParked)
			}, want: keystore.PhaseAwaitingApproval},
			{name: "rejected", space: gatedNS, key: "g2", write: func() { ok(e.decide(true, "g2", "bob", "duplicate")) }, want: keystore.PhaseRejected},
			{name: "the rejected key's resume claimed", space: gatedNS, key: "g2", write: func() {
				if !e.claimGated("g2") {
					t.Fatal("claim refused")
				}
			}, want: keystore.PhaseRejected},
			{name: "the rejected key's execution woken", space: gatedNS, key: "g2", write: func() { answer(gatedNS, "g2", keystore.ResumeAccepted) }},
			{name: "a lease that runs out, swept", key: "s1", write: func() {
				e.reserve(ns, "s1", func(r *keystore.ReserveRequest) { r.Lease = time.Minute })
				e.clock.Advance(2 * time.Minute)
				if _, err := e.s.Sweep(e.ctx); err != nil {
					t.Fatal(err)
				}
			}},
		}
		for _, st := range steps {
			space := st.space
			if space == "" {
				space = ns
			}
			st.write()
			e.checkStep(st.name, space, st.key, st.want)
			if st.restart {
				e.restart()
				e.checkStep(st.name+", after a restart", space, st.key, st.want)
			}
		}
	})
	t.Run("a key in every stage reads back and is indexed at it, across a restart", func(t *testing.T) {
		e := setup(t, newStore, StagePolicies)
		want := EveryStage(t, e.s, e.clock.Advance)
		WantStages(t, e.s, want)
		e.restart()
		WantStages(t, e.s, want)
	})
	t.Run("the keys of a stage, by namespace and key, in pages", func(t *testing.T) {
		e := setup(t, newStore, pol)
		for _, space := range []string{"a-ns", ns, "z-ns"} {
			for _, key := range []string{"k3", "k1", "k2"} {
				tok := e.reserve(space, key, func(r *keystore.ReserveRequest) { r.Owner = exec42 }).Token
				e.fail(space, key, tok, keystore.ReasonDestinationFailed)
				wantOutcome(t, e.reserve(space, key, gate), keystore.OutcomeRerunNotGranted)
			}
		}
		tok := e.reserve(ns, "k0", func(r *keystore.ReserveRequest) { r.Owner = exec42 }).Token
		e.fail(ns, "k0", tok, keystore.ReasonDestinationFailed) // failed, never at its gate
		var got []string
		q := keystore.StageQuery{Stage: keystore.StageAtGate, Limit: 2}
		for {
			rs, err := e.s.KeysAtStage(e.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 0 {
				break
			}
			for _, r := range rs {
				got = append(got, r.Namespace+"/"+r.Key)
			}
			last := rs[len(rs)-1]
			q.AfterNamespace, q.AfterKey = last.Namespace, last.Key
		}
		want := []string{"a-ns/k1", "a-ns/k2", "a-ns/k3", ns + "/k1", ns + "/k2", ns + "/k3", "z-ns/k1", "z-ns/k2", "z-ns/k3"}
		if !slices.Equal(got, want) {
			t.Fatalf("at the gate, in pages of 2: %v, want %v", got, want)
		}
		rs, err := e.s.KeysAtStage(e.ctx, keystore.StageQuery{Stage: keystore.StageAtGate, Namespace: ns, AfterNamespace: ns, AfterKey: "k1"})
		if err != nil || len(rs) != 2 || rs[0].Key != "k2" || rs[1].Key != "k3" {
			t.Fatalf("in %s after k1: %v %v", ns, keysOfRecords(rs), err)
		}
		if rs, err := e.s.KeysAtStage(e.ctx, keystore.StageQuery{Stage: keystore.StageGranted}); err != nil || len(rs) != 0 {
			t.Fatalf("granted: %v %v, want none", keysOfRecords(rs), err)
		}
		for _, bad := range []keystore.StageQuery{{}, {Stage: "parked"}, {Stage: keystore.StageAtGate, Namespace: "Bad NS"}} {
			_, err := e.s.KeysAtStage(e.ctx, bad)
			wantCode(t, err, errs.InvalidRequest)
		}
	})
}

func keysOfRecords(rs []*keystore.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Namespace+"/"+r.Key)
	}
	return out
}

// checkStep checks the stage of key after the step named: the record read
// back says want, which is StageOf its fields, and the stage index holds
// the key under want and under no other stage.
func (e *env) checkStep(step, space, key string, want keystore.Stage) {
	e.t.Helper()
	rec := e.lookup(space, key).Record
	if rec == nil {
		e.t.Fatalf("%s: %s/%s is absent", step, space, key)
	}
	if rec.Stage != want || keystore.StageOf(rec) != want {
		e.t.Fatalf("%s: %s/%s (state %s, reason %s) has stage %q, StageOf %q, want %q", step, space, key, rec.State, rec.Reason, rec.Stage, keystore.StageOf(rec), want)
	}
	for _, st := range keystore.Stages {
		rs, err := e.s.KeysAtStage(e.ctx, keystore.StageQuery{Stage: st, Namespace: space, Limit: 1000})
		if err != nil {
			e.t.Fatalf("%s: keys at stage %s: %v", step, st, err)
		}
		in := slices.ContainsFunc(rs, func(r *keystore.Record) bool { return r.Key == key })
		if in != (st == want) {
			e.t.Fatalf("%s: %s/%s in the index of stage %s: %v, want stage %q", step, space, key, st, in, want)
		}
	}
}

// check is checkStep without a step's name.
func (e *env) check(space, key string, want keystore.Stage) { e.checkStep("", space, key, want) }
