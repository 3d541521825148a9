package bolt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A key parked before destinations.<name>.namespaces left its namespace
// out is not claimed for a resume after the restart: the claim records it
// resume_lost, so it leaves the parked listing and counts instead of
// waiting there, resumed, for ever.
func TestClaimResumeLosesAKeyWhoseNamespaceTheDestinationNoLongerAdmits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	before := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Hour, UnreachableThreshold: 1}}}
	s, err := Open(path, Options{Policies: before})
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
	p, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "parked", Owner: "wf", Destination: "hubspot", ResumeURL: "http://n8n.local/webhook-waiting/1"})
	if err != nil || p.Outcome != keystore.OutcomeParked {
		t.Fatalf("park: %+v %v", p, err)
	}
	s.Close()

	after := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Hour, UnreachableThreshold: 1, Namespaces: []string{"sales"}}}}
	s, err = Open(path, Options{Policies: after})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rec, ok, err := s.ClaimResume(ctx, "crm", "parked", 30*time.Second); err != nil || ok || rec != nil {
		t.Fatalf("claim: %+v %v %v, want refused", rec, ok, err)
	}
	got, err := s.Lookup(ctx, "crm", "parked")
	if err != nil || got.Record.State != keystore.StateParked || got.Record.Reason != keystore.ReasonResumeLost || got.Record.ResumeSentAt != nil {
		t.Fatalf("after the claim: %+v %v, want parked, resume_lost, never sent", got.Record, err)
	}
	counts, err := s.ParkedCounts(ctx)
	if err != nil || counts["hubspot"] != 0 {
		t.Fatalf("parked counts %v %v: the lost key is still counted", counts, err)
	}
	if listed, err := s.ParkedByWait(ctx, keystore.WaitQuery{Destination: "hubspot", Stages: keystore.QueuedStages}); err != nil || len(listed) != 0 {
		t.Fatalf("the catch-up's queue %v %v: the lost key is still queued", listed, err)
	}
}
