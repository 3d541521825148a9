package catchup_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// A decision wakes the approval resumer: with an Interval of an hour, an
// approval made while the resumer waits is resumed at its commit, not at
// the next look.
func TestAnApprovalWakesTheResumerAtItsCommit(t *testing.T) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Approval: keystore.ApprovalPolicy{Required: true}}}}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	for i, key := range []string{"inv_1", "inv_2"} {
		id := string(rune('1' + i))
		fake.keys[id] = key
		if _, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", RequestedBy: "ann",
			ResumeURL: srv.URL + "/webhook-waiting/" + id, Fingerprint: "event " + key}); err != nil {
			t.Fatal(err)
		}
	}
	approve := func(key string) {
		t.Helper()
		if _, err := keystore.ApprovalStore(store).Approve(ctx, keystore.ApprovalRequest{Namespace: ns, Key: key, By: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	woken := func(id string) func() bool {
		return func() bool { fake.mu.Lock(); defer fake.mu.Unlock(); return fake.woken[id] == 1 }
	}
	approve("inv_1")
	runner, err := catchup.New(catchup.Options{Store: store, Policies: pol, Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)},
		Interval: time.Hour, Claim: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- runner.Run(rctx) }()
	defer func() { cancel(); <-stopped; fake.wg.Wait() }()
	testwait.Within(t, time.Minute, "inv_1 resumed at the resumer's first look", woken("1"))
	approve("inv_2") // the resumer has looked and waits
	testwait.Within(t, time.Minute, "inv_2 resumed at its approval's commit", woken("2"))
}
