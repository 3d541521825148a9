package bolt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// A file from before idx/woken holds keys n8n already woke: the first
// open of this version indexes them, so WokenCounts counts them from the
// start instead of only the keys woken after the upgrade.
func TestWokenIndexIsBuiltForAnOlderFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	clock := fakeclock.At(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	opts := Options{Clock: clock.Now,
		Policies: keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, UnreachableThreshold: 1}}}}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "first", Owner: "wf", Destination: "hubspot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, keystore.FailRequest{Namespace: "crm", Key: "first", Token: r.Token, Reason: keystore.ReasonDestinationUnreachable}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if p, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: k, Owner: "wf", Destination: "hubspot", ResumeURL: "http://n8n.local/webhook-waiting/" + k}); err != nil || p.Outcome != keystore.OutcomeParked {
			t.Fatalf("park %s: %+v %v", k, p, err)
		}
	}
	clock.Advance(2 * time.Minute)
	rec, ok, err := s.ClaimResume(ctx, "crm", "a", 30*time.Second)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := s.ResumeAnswered(ctx, "crm", "a", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The file as the previous version left it: no idx/woken.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket(bucketWoken) }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	woken, err := s.WokenCounts(ctx)
	if err != nil || woken["hubspot"] != 1 || len(woken) != 1 {
		t.Fatalf("woken counts after the upgrade: %v %v, want hubspot 1", woken, err)
	}
	parked, err := s.ParkedCounts(ctx)
	if err != nil || parked["hubspot"] != 1 {
		t.Fatalf("parked counts after the upgrade: %v %v, want hubspot 1", parked, err)
	}
}
