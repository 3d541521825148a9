package catchup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// The approval resumer is woken by the commits of its namespaces'
// decided keys alone: a burst of 1,000 reserves in another namespace
// (and keys of its own namespace that wait for a person) makes it read
// nothing, and the approval that follows wakes it at once, its first look
// after the start.
func TestABurstOfOtherCommitsDoesNotWakeTheApprovalResumer(t *testing.T) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Approval: keystore.ApprovalPolicy{Required: true}}}}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	fake.keys["1"] = "inv_1"
	awaiting := func(key, id string) {
		t.Helper()
		if _, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", RequestedBy: "ann",
			ResumeURL: srv.URL + "/webhook-waiting/" + id, Fingerprint: "event " + key}); err != nil {
			t.Fatal(err)
		}
	}
	awaiting("inv_1", "1")
	runner, err := catchup.New(catchup.Options{Store: store, Policies: pol, Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)},
		Interval: time.Hour, Claim: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var looks []int // what each look found
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		catchup.RunApprovals(rctx, runner, func(found int) { mu.Lock(); looks = append(looks, found); mu.Unlock() })
	}()
	defer func() { cancel(); <-stopped; fake.wg.Wait() }()
	seen := func() []int { mu.Lock(); defer mu.Unlock(); return append([]int(nil), looks...) }
	testwait.For(t, "the resumer's first look", func() bool { return len(seen()) == 1 })

	for i := range 1000 {
		if _, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "other", Key: fmt.Sprint("evt_", i), Owner: "n8n wf9 exec 9"}); err != nil {
			t.Fatal(err)
		}
	}
	awaiting("inv_2", "2") // of its namespace, but it waits for a person
	if _, err := keystore.ApprovalStore(store).Approve(ctx, keystore.ApprovalRequest{Namespace: ns, Key: "inv_1", By: "bob"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "a look that found the approved key", func() bool {
		for _, found := range seen() {
			if found > 0 {
				return true
			}
		}
		return false
	})
	if got := seen(); got[1] != 1 {
		t.Fatalf("the resumer's looks found %v: want its second look, woken by the approval, to find inv_1 (the burst woke it %d times)", got, len(got)-2)
	}
	testwait.For(t, "inv_1 resumed", func() bool { fake.mu.Lock(); defer fake.mu.Unlock(); return fake.woken["1"] == 1 })
}
