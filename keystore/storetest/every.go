package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// StagePolicies are the policies a store given to EveryStage is opened
// with: the namespace invoices requires approval; the destinations d-*
// pause at their first unreachable write for a minute.
var StagePolicies = keystore.Policies{
	Namespaces: map[string]keystore.NamespacePolicy{gatedNS: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}},
	Destinations: map[string]keystore.DestinationPolicy{
		"d-wait": {Cooldown: time.Minute, UnreachableThreshold: 1}, "d-claim": {Cooldown: time.Minute, UnreachableThreshold: 1},
		"d-resumed": {Cooldown: time.Minute, UnreachableThreshold: 1}, "d-lost": {Cooldown: time.Minute, UnreachableThreshold: 1},
	},
}

// StagedKey names a key EveryStage wrote.
type StagedKey struct{ Namespace, Key string }

// EveryStage writes through s (opened with StagePolicies, on a clock
// advance moves) a key in every stage, and keys in none, and returns the
// stage each key must have, as the Decide paths that wrote it say: the
// fixture of the tests that migrate data written before the stage was
// stored (it is what PhaseOf and the re-run history said of it).
func EveryStage(t testing.TB, s keystore.Store, advance func(time.Duration)) map[StagedKey]keystore.Stage {
	t.Helper()
	ctx := context.Background()
	want := map[StagedKey]keystore.Stage{}
	must := func(r keystore.Result, err error) keystore.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	yes := func(ok bool, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("%v %v", ok, err)
		}
	}
	reserve := func(space, key string, mod func(*keystore.ReserveRequest)) keystore.Result {
		t.Helper()
		req := keystore.ReserveRequest{Namespace: space, Key: key, Owner: "n8n wf1 exec " + key}
		if mod != nil {
			mod(&req)
		}
		return must(s.Reserve(ctx, req))
	}
	gate := func(r *keystore.ReserveRequest) { r.Rerun = true }
	// Re-runs.
	failed := func(key string) {
		t.Helper()
		tok := reserve(ns, key, nil).Token
		must(s.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: tok, Reason: keystore.ReasonDestinationFailed, Message: "HTTP 503"}))
	}
	atGate := func(key string) {
		t.Helper()
		failed(key)
		if r := reserve(ns, key, gate); r.Outcome != keystore.OutcomeRerunNotGranted {
			t.Fatalf("gate of %s: %s", key, r.Outcome)
		}
	}
	grant := func(key string) {
		must(s.Resolve(ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "back"}))
	}
	claimRerun := func(key string) { yes(claimed(s.ClaimRerunHeld(ctx, ns, key, "guard-a", time.Minute, 10*time.Minute))) }
	reserve(ns, "reserved", nil)
	want[StagedKey{ns, "reserved"}] = ""
	tok := reserve(ns, "completed", nil).Token
	must(s.Complete(ctx, keystore.CompleteRequest{Namespace: ns, Key: "completed", Token: tok, ResultRef: "crm-1"}))
	want[StagedKey{ns, "completed"}] = ""
	failed("failed")
	want[StagedKey{ns, "failed"}] = ""
	atGate("at_gate")
	want[StagedKey{ns, "at_gate"}] = keystore.StageAtGate
	atGate("acked")
	must(s.Acknowledge(ctx, keystore.AckRequest{Namespace: ns, Key: "acked", Event: keystore.HistoryAcknowledged, By: "Ana"}))
	want[StagedKey{ns, "acked"}] = keystore.StageAtGate
	atGate("granted")
	grant("granted")
	want[StagedKey{ns, "granted"}] = keystore.StageGranted
	atGate("starting")
	grant("starting")
	claimRerun("starting")
	want[StagedKey{ns, "starting"}] = keystore.StageStarting
	atGate("started")
	grant("started")
	claimRerun("started")
	yes(s.NoteRerun(ctx, ns, "started", keystore.HistoryRerunStarted, "57"))
	want[StagedKey{ns, "started"}] = keystore.StageStarted
	atGate("refused")
	grant("refused")
	claimRerun("refused")
	yes(s.NoteRerun(ctx, ns, "refused", keystore.HistoryRerunRefused, "HTTP 404"))
	want[StagedKey{ns, "refused"}] = keystore.StageRefused
	atGate("final")
	must(s.Resolve(ctx, keystore.ResolveRequest{Namespace: ns, Key: "final", Resolution: keystore.StateFailed, Final: true, By: "Ana", Note: "by hand"}))
	want[StagedKey{ns, "final"}] = ""
	// Parked, one destination per phase.
	for _, p := range []struct {
		dest, key string
	}{{"d-wait", "p_waiting"}, {"d-claim", "p_claimed"}, {"d-resumed", "p_resumed"}, {"d-lost", "p_lost"}} {
		first := "first_" + p.dest
		tok := reserve(ns, first, func(r *keystore.ReserveRequest) { r.Destination = p.dest }).Token
		must(s.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: first, Token: tok, Reason: keystore.ReasonDestinationUnreachable, Message: "refused"}))
		want[StagedKey{ns, first}] = ""
		if r := reserve(ns, p.key, func(r *keystore.ReserveRequest) {
			r.Destination, r.ResumeURL = p.dest, "http://n8n.local/webhook-waiting/"+p.key
		}); r.Outcome != keystore.OutcomeParked {
			t.Fatalf("park %s: %s", p.key, r.Outcome)
		}
	}
	want[StagedKey{ns, "p_waiting"}] = keystore.PhaseWaiting
	advance(time.Minute)
	for _, key := range []string{"p_claimed", "p_resumed", "p_lost"} {
		if _, ok, err := s.ClaimResume(ctx, ns, key, 30*time.Second); err != nil || !ok {
			t.Fatalf("claim %s: %v %v", key, ok, err)
		}
	}
	want[StagedKey{ns, "p_claimed"}] = keystore.PhaseClaimed
	answer := func(space, key string, a keystore.ResumeAnswer) {
		t.Helper()
		r := must(s.Lookup(ctx, space, key))
		if _, err := s.ResumeAnswered(ctx, space, key, *r.Record.ParkedAt, a, "test"); err != nil {
			t.Fatal(err)
		}
	}
	answer(ns, "p_resumed", keystore.ResumeAccepted)
	want[StagedKey{ns, "p_resumed"}] = keystore.PhaseResumed
	answer(ns, "p_lost", keystore.ResumeLost)
	want[StagedKey{ns, "p_lost"}] = keystore.PhaseLost
	// Approvals.
	gated := func(key string) {
		t.Helper()
		if r := reserve(gatedNS, key, func(r *keystore.ReserveRequest) {
			r.ResumeURL, r.RequestedBy, r.Fingerprint = "http://n8n.local/webhook-waiting/"+key, "ann", "invoice "+key
		}); r.Outcome != keystore.OutcomeParked {
			t.Fatalf("gated %s: %s", key, r.Outcome)
		}
	}
	decide := func(key string, reject bool) {
		req := keystore.ApprovalRequest{Namespace: gatedNS, Key: key, By: "bob", Note: "no"}
		if reject {
			must(s.Reject(ctx, req))
		} else {
			must(s.Approve(ctx, req))
		}
	}
	gated("g_awaiting")
	want[StagedKey{gatedNS, "g_awaiting"}] = keystore.PhaseAwaitingApproval
	gated("g_approved")
	decide("g_approved", false)
	want[StagedKey{gatedNS, "g_approved"}] = keystore.PhaseApproved
	gated("g_approved_claimed")
	decide("g_approved_claimed", false)
	if _, ok, err := s.ClaimResume(ctx, gatedNS, "g_approved_claimed", 30*time.Second); err != nil || !ok {
		t.Fatalf("claim g_approved_claimed: %v %v", ok, err)
	}
	want[StagedKey{gatedNS, "g_approved_claimed"}] = keystore.PhaseApproved
	gated("g_rejected")
	decide("g_rejected", true)
	want[StagedKey{gatedNS, "g_rejected"}] = keystore.PhaseRejected
	gated("g_rejected_done")
	decide("g_rejected_done", true)
	if _, ok, err := s.ClaimResume(ctx, gatedNS, "g_rejected_done", 30*time.Second); err != nil || !ok {
		t.Fatalf("claim g_rejected_done: %v %v", ok, err)
	}
	answer(gatedNS, "g_rejected_done", keystore.ResumeAccepted)
	want[StagedKey{gatedNS, "g_rejected_done"}] = ""
	return want
}

// WantStages checks that every key of want has its stage in the record
// s reads back and in s's stage index, and no other key is indexed.
func WantStages(t testing.TB, s keystore.Store, want map[StagedKey]keystore.Stage) {
	t.Helper()
	ctx := context.Background()
	indexed := map[StagedKey]keystore.Stage{}
	for _, st := range keystore.Stages {
		rs, err := s.KeysAtStage(ctx, keystore.StageQuery{Stage: st, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			k := StagedKey{r.Namespace, r.Key}
			if prev, ok := indexed[k]; ok {
				t.Errorf("%v indexed at %s and %s", k, prev, st)
			}
			indexed[k] = st
		}
	}
	for k, st := range want {
		r, err := s.Lookup(ctx, k.Namespace, k.Key)
		if err != nil || r.Record == nil {
			t.Fatalf("lookup %v: %v", k, err)
		}
		if r.Record.Stage != st {
			t.Errorf("%v (state %s, reason %s) reads back at stage %q, want %q", k, r.Record.State, r.Record.Reason, r.Record.Stage, st)
		}
		if indexed[k] != st {
			t.Errorf("%v is indexed at stage %q, want %q", k, indexed[k], st)
		}
		delete(indexed, k)
	}
	for k, st := range indexed {
		t.Errorf("%v is indexed at stage %q and not among the keys written", k, st)
	}
}
