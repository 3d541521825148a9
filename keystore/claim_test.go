package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A probe n8n woke holds its destination for a lease from the waking (the
// time its execution has to reserve), not for the claim and a lease from
// its claim: a woken probe whose execution died frees the destination
// within the lease, and the next parked key probes then.
func TestAWokenProbeHoldsItsDestinationForALease(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	claimAt := t0.Add(2 * time.Minute)
	lease, claim := time.Minute, 2*time.Minute
	np := keystore.NamespacePolicy{Lease: lease}
	br := keystore.NewBreaker("crm")
	br.State, br.OpenedAt, br.ReopensAt = keystore.BreakerOpen, &t0, ptr(t0.Add(time.Minute)) // cooldown over
	first, second := parkedKeyAt("evt_1", t0), parkedKeyAt("evt_2", t0.Add(time.Second))

	claimed, ok := keystore.DecideClaimResume(first, br, claim, np, claimAt)
	if !ok || claimed.Breaker == nil || claimed.Breaker.ProbeKey != "evt_1" {
		t.Fatalf("the oldest key did not become the probe: %+v", claimed.Breaker)
	}
	wokenAt := claimAt.Add(5 * time.Second)
	st, ok := keystore.DecideResumeAnswered(claimed.Record, claimed.Breaker, t0, keystore.ResumeAccepted, "", wokenAt)
	if !ok {
		t.Fatal("the acceptance was not recorded")
	}
	woken := keystore.WokenProbeHold(st, claimed.Record, claimed.Breaker, lease, wokenAt)
	if woken.Breaker == nil || woken.Breaker.ProbeUntil == nil || !woken.Breaker.ProbeUntil.Equal(wokenAt.Add(lease)) {
		t.Fatalf("the woken probe is held until %v, want a lease from its waking (%v)", woken.Breaker, wokenAt.Add(lease))
	}
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{wokenAt.Add(lease - time.Millisecond), false}, // its execution may still reserve
		{wokenAt.Add(lease), true},                     // it had its lease: dead
	} {
		if _, ok := keystore.DecideClaimResume(second, woken.Breaker, claim, np, tc.at); ok != tc.want {
			t.Errorf("the next key claimed %s after the waking: %v, want %v", tc.at.Sub(wokenAt), ok, tc.want)
		}
	}
	// Other answers, and an acceptance of a key that is not the probe,
	// leave the breaker as DecideResumeAnswered left it.
	retry, _ := keystore.DecideResumeAnswered(claimed.Record, claimed.Breaker, t0, keystore.ResumeRetry, "", wokenAt)
	if got := keystore.WokenProbeHold(retry, claimed.Record, claimed.Breaker, lease, wokenAt); got.Breaker != nil {
		t.Errorf("a retry answer changed the breaker: %+v", got.Breaker)
	}
	other := parkedKeyAt("evt_3", t0)
	other.ResumeClaimUntil = ptr(claimAt.Add(claim))
	acc, _ := keystore.DecideResumeAnswered(other, claimed.Breaker, t0, keystore.ResumeAccepted, "", wokenAt)
	if got := keystore.WokenProbeHold(acc, other, claimed.Breaker, lease, wokenAt); got.Breaker != nil {
		t.Errorf("a key that is not the probe changed the breaker: %+v", got.Breaker)
	}
}
