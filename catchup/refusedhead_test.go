package catchup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// Events of a namespace the destination no longer admits
// (destinations.<name>.namespaces changed during a maintenance window)
// wait at the head of its queue; the catch-up's claim records each lost. That is no
// refusal of the destination: the pass goes on, and the oldest admitted
// event becomes the probe at once, not one interval (here an hour) per
// lost key later.
func TestKeysOfARefusedNamespaceDoNotHoldUpTheProbe(t *testing.T) {
	clock := &outageClock{}
	path := filepath.Join(t.TempDir(), "guard.db")
	store, err := bolt.Open(path, bolt.Options{Policies: outagePolicies, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A maintenance window pauses the CRM (for every namespace, never
	// narrowed); four events of "legacy" park during it.
	if _, err := store.HoldDestination(ctx, "crm", "Ana", "CRM upgrade", clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		clock.Advance(time.Millisecond)
		key := fmt.Sprintf("old_%d", i)
		if r, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "legacy", Key: key, Destination: "crm",
			ResumeURL: "http://n8n.local/webhook-waiting/legacy-" + key}); err != nil || r.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve %s: %+v %v", key, r, err)
		}
	}
	store.Close()

	// The guard restarts with crm limited to ns; the window ends.
	pol := outagePolicies
	pol.Destinations = map[string]keystore.DestinationPolicy{"crm": {Cooldown: time.Hour, CatchUpRate: 50, CatchUpConcurrency: 3,
		UnreachableThreshold: 1, Namespaces: []string{ns}}}
	store, err = bolt.Open(path, bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock.Advance(time.Hour + time.Second)
	newEventCaughtUp(t, store, clock, pol)
	for i := range 4 {
		if r, err := store.Lookup(ctx, "legacy", fmt.Sprintf("old_%d", i)); err != nil || r.Record.Reason != keystore.ReasonResumeLost {
			t.Fatalf("legacy/old_%d: %+v %v, want resume_lost", i, r.Record, err)
		}
	}
}
