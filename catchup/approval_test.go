package catchup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// Approvals: three events of a gated namespace wait in n8n; nothing is
// resumed until a person decides; the two approved ones are resumed and
// written once each, the rejected one is resumed, writes nothing, and its
// key ends failed for good; a late approve resumes nothing again.
func TestApprovalsResumeDecidedExecutions(t *testing.T) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	for i, key := range []string{"inv_1", "inv_2", "inv_3"} {
		id := string(rune('1' + i))
		fake.keys[id] = key
		res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", RequestedBy: "ann",
			ResumeURL: srv.URL + "/webhook-waiting/" + id, Fingerprint: "event " + key})
		if err != nil || res.Outcome != keystore.OutcomeParked || res.Record.Reason != keystore.ReasonAwaitingApproval {
			t.Fatalf("reserve %s: %+v %v", key, res, err)
		}
	}
	fake.early["2"] = 1 // the approval came before the execution reached its Wait node

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	looks := &passes{Store: store}
	runner, err := catchup.New(catchup.Options{Store: looks, Policies: pol, Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)},
		Interval: 20 * time.Millisecond, Claim: 5 * time.Second, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- runner.Run(rctx) }()

	// Undecided: nothing is resumed at the resumer's first pass (the
	// next is at a commit or a minute later).
	// Counted from the start, not from now: the runner's goroutine may
	// have made its first pass already, and the next comes a minute later.
	testwait.For(t, "the approval resumer's first pass", func() bool { return looks.decided.Load() >= 2 }) // its approved and its rejected keys
	fake.mu.Lock()
	if len(fake.calls) != 0 {
		t.Fatalf("resumed before any decision: %v", fake.calls)
	}
	fake.mu.Unlock()

	as := keystore.ApprovalStore(store)
	for _, key := range []string{"inv_1", "inv_2"} {
		if _, err := as.Approve(ctx, keystore.ApprovalRequest{Namespace: ns, Key: key, By: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := as.Reject(ctx, keystore.ApprovalRequest{Namespace: ns, Key: "inv_3", By: "bob", Note: "duplicate invoice"}); err != nil {
		t.Fatal(err)
	}
	if !testwait.Poll(testwait.Deadline, func() bool {
		r3, _ := store.Lookup(ctx, ns, "inv_3")
		fake.mu.Lock()
		written := len(fake.crm)
		fake.mu.Unlock()
		return written == 2 && r3.Record.State == keystore.StateFailed
	}) {
		fake.mu.Lock()
		t.Fatalf("not resumed after %s: %v, in the CRM %v", testwait.Deadline, fake.calls, fake.crm)
	}
	// A late approve of a finished key changes nothing and wakes nothing.
	late, err := as.Approve(ctx, keystore.ApprovalRequest{Namespace: ns, Key: "inv_1", By: "carl"})
	if err != nil || !late.Replayed {
		t.Fatalf("late approve: %+v %v", late, err)
	}
	// The stall is the test: a replayed approve commits nothing, so no
	// pass comes to wait for; a wrong wake would resume within it.
	time.Sleep(200 * time.Millisecond)
	cancel()
	<-stopped
	fake.wg.Wait()

	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.crm["inv_1"] != 1 || fake.crm["inv_2"] != 1 || fake.crm["inv_3"] != 0 {
		t.Fatalf("CRM writes %v, want inv_1 and inv_2 once, inv_3 never", fake.crm)
	}
	for id, n := range fake.woken {
		if n != 1 {
			t.Errorf("execution %s woken %d times", id, n)
		}
	}
	if len(fake.woken) != 3 {
		t.Errorf("woken %v, want all three executions (the rejected one to end)", fake.woken)
	}
	r3, _ := store.Lookup(ctx, ns, "inv_3")
	if r3.Record.Reason != keystore.ReasonApprovalRejected || r3.Record.Retryable || r3.Record.Message != "duplicate invoice" {
		t.Fatalf("rejected key: %+v", r3.Record)
	}
	for _, key := range []string{"inv_1", "inv_2"} {
		r, _ := store.Lookup(ctx, ns, key)
		if r.Record.State != keystore.StateCompleted {
			t.Errorf("%s: %s, want completed", key, r.Record.State)
		}
	}
}

// An approved event whose execution dies after the approval resumer woke
// it (n8n accepted the call, then restarted) is reported like any woken
// execution that goes silent: after the bound (a lease) the key is
// parked, resume_lost, its owner told once, never woken again. Before,
// the approved key stayed parked with nobody told: the write a person
// approved waited unseen for ever.
func TestAnApprovedExecutionThatDiesIsReported(t *testing.T) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Lease: time.Minute, Approval: keystore.ApprovalPolicy{Required: true}}}}
	clock := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	fake.keys["1"], fake.silent["1"] = "inv_1", true
	res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "inv_1", Destination: "crm", RequestedBy: "ann",
		ResumeURL: srv.URL + "/webhook-waiting/1", Fingerprint: "invoice 1"})
	if err != nil || res.Record.Reason != keystore.ReasonAwaitingApproval {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	if _, err := keystore.ApprovalStore(store).Approve(ctx, keystore.ApprovalRequest{Namespace: ns, Key: "inv_1", By: "bob"}); err != nil {
		t.Fatal(err)
	}
	opts := catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: time.Second,
		Claim: 2 * time.Minute}
	runUntil(t, opts, fake, "reported lost", func() bool { return len(lostEvents(t, store)) > 0 }, func() string {
		r, _ := store.Lookup(ctx, ns, "inv_1")
		return fmt.Sprintf("the approved, woken and silent key %+v", r.Record)
	})
	r, err := store.Lookup(ctx, ns, "inv_1")
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.Record; rec.State != keystore.StateParked || rec.Reason != keystore.ReasonResumeLost || rec.ResumeSentAt == nil ||
		rec.UpdatedAt.Sub(*rec.ResumeSentAt) < time.Minute {
		t.Fatalf("the silent approved key: %s %s, woken %v, updated %v", rec.State, rec.Reason, rec.ResumeSentAt, rec.UpdatedAt)
	}
	if got := lostEvents(t, store); len(got) != 1 {
		t.Fatalf("lost events %v, want one for inv_1", got)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.woken["1"] != 1 || fake.crm["inv_1"] != 0 {
		t.Fatalf("woken %d times, written %d times: want woken once, never written", fake.woken["1"], fake.crm["inv_1"])
	}
}

// The approval resumer's calls take the destination's turns like the
// catch-up's: three events approved at once (a bulk approval) are woken
// at catch_up_rate, not all in the same instant.
func TestApprovalResumesKeepTheDestinationsPace(t *testing.T) {
	pol := keystore.Policies{
		Namespaces:   map[string]keystore.NamespacePolicy{ns: {Approval: keystore.ApprovalPolicy{Required: true}}},
		Destinations: map[string]keystore.DestinationPolicy{"crm": {CatchUpRate: 1, CatchUpConcurrency: 5}},
	}
	clock := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	keys := []string{"inv_1", "inv_2", "inv_3"}
	for i, key := range keys {
		id := fmt.Sprint(i + 1)
		fake.keys[id] = key
		if _, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", RequestedBy: "ann",
			ResumeURL: srv.URL + "/webhook-waiting/" + id, Fingerprint: "event " + key}); err != nil {
			t.Fatal(err)
		}
		if _, err := keystore.ApprovalStore(store).Approve(ctx, keystore.ApprovalRequest{Namespace: ns, Key: key, By: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	opts := catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep,
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: 20 * time.Millisecond,
		Claim: 2 * time.Minute, Poll: 10 * time.Millisecond}
	var mu sync.Mutex
	var turns []time.Time
	catchup.OnPaced(&opts, func(_ string, at time.Time) { mu.Lock(); turns = append(turns, at); mu.Unlock() })
	runUntil(t, opts, fake, "written", func() bool { return fake.written() == len(keys) }, func() string {
		return fmt.Sprintf("%d of %d approved events written", fake.written(), len(keys))
	})
	mu.Lock()
	defer mu.Unlock()
	if len(turns) != len(keys) {
		t.Fatalf("%d resume turns, want one per approved event", len(turns))
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i].Before(turns[j]) })
	for i := 1; i < len(turns); i++ {
		if gap := turns[i].Sub(turns[i-1]); gap < 990*time.Millisecond {
			t.Errorf("resume turns %v apart at catch_up_rate 1/s: %v", gap, turns)
		}
	}
}
