package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Guard A's claim lapsed while it still retried; guard B claimed and n8n
// accepted B's call; A's late call gets 409 finished: that lost answer
// is stale and does not record the living execution lost (no owner is
// told of a loss that did not happen).
func TestALateLostAnswerDoesNotLoseAWokenExecution(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Minute, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	s, clock := parkedOne(t, pol, "k")
	ctx := context.Background()
	a, ok, _ := s.ClaimResume(ctx, ns, "k", 2*time.Minute)
	if !ok {
		t.Fatal("A claim")
	}
	clock.Advance(2*time.Minute + time.Second) // A's claim lapsed, A still retrying
	b, ok, _ := s.ClaimResume(ctx, ns, "k", 2*time.Minute)
	if !ok {
		t.Fatal("B claim refused")
	}
	s.ResumeAnswered(ctx, ns, "k", *b.ParkedAt, keystore.ResumeAccepted, "")
	got, _ := s.ResumeAnswered(ctx, ns, "k", *a.ParkedAt, keystore.ResumeLost, "409 finished")
	if got != nil && got.Reason == keystore.ReasonResumeLost {
		t.Fatalf("a woken, alive execution recorded resume_lost by a stale claimant's answer; events %v", lostEvents(t, s))
	}
}
