package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// parkedKeyAt returns a parked key of destination crm, parked at at.
func parkedKeyAt(key string, at time.Time) *keystore.Record {
	return &keystore.Record{Namespace: "crm-contacts", Key: key, State: keystore.StateParked, Destination: "crm",
		ParkedAt: &at, ResumeURL: "http://n8n.local/webhook-waiting/" + key, CreatedAt: at, UpdatedAt: at, Retryable: true}
}

// The probe's execution is gone from n8n: the answer frees the probe in
// the same step, so the next parked key of the destination probes at
// once instead of after claim + lease. Other answers, and a lost key that
// is not the probe, leave the breaker alone.
func TestALostProbeFreesTheDestinationAtOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	now := t0.Add(2 * time.Minute)
	np := keystore.Policies{}.Namespace("crm-contacts")
	br := keystore.NewBreaker("crm")
	br.State, br.OpenedAt, br.ReopensAt = keystore.BreakerOpen, &t0, ptr(t0.Add(time.Minute)) // cooldown over
	first, second := parkedKeyAt("evt_1", t0), parkedKeyAt("evt_2", t0.Add(time.Second))

	claimed, ok := keystore.DecideClaimResume(first, br, time.Minute, np, now)
	if !ok || claimed.Breaker == nil || claimed.Breaker.ProbeKey != "evt_1" {
		t.Fatalf("the oldest key did not become the probe: %+v", claimed.Breaker)
	}
	probing := claimed.Breaker
	if _, ok := keystore.DecideClaimResume(second, probing, time.Minute, np, now); ok {
		t.Fatal("a second key was claimed while the probe is out")
	}

	for _, a := range []keystore.ResumeAnswer{keystore.ResumeAccepted, keystore.ResumeRetry} {
		if st, _ := keystore.DecideResumeAnswered(claimed.Record, probing, t0, a, "", now); st.Breaker != nil {
			t.Errorf("answer %d changed the breaker: %+v", a, st.Breaker)
		}
	}
	lost, ok := keystore.DecideResumeAnswered(claimed.Record, probing, t0, keystore.ResumeLost, "404 The execution does not exist", now)
	if !ok || lost.Record.Reason != keystore.ReasonResumeLost {
		t.Fatalf("the lost answer was not recorded: %+v", lost.Record)
	}
	if lost.Breaker == nil || lost.Breaker.ProbeKey != "" || lost.Breaker.ProbeUntil != nil || lost.Breaker.State != keystore.BreakerHalfOpen {
		t.Fatalf("the lost probe kept its slot: %+v", lost.Breaker)
	}
	next, ok := keystore.DecideClaimResume(second, lost.Breaker, time.Minute, np, now)
	if !ok || next.Breaker == nil || next.Breaker.ProbeKey != "evt_2" {
		t.Fatalf("the next parked key does not probe at once: %v %+v", ok, next.Breaker)
	}

	// Another key lost while evt_2 probes: the probe is not touched.
	third := parkedKeyAt("evt_3", t0.Add(2*time.Second))
	third.ResumeClaimUntil = ptr(now.Add(time.Minute))
	if st, ok := keystore.DecideResumeAnswered(third, next.Breaker, t0.Add(2*time.Second), keystore.ResumeLost, "404", now); !ok || st.Breaker != nil {
		t.Fatalf("a lost key that is not the probe changed the breaker: %v %+v", ok, st.Breaker)
	}
}

// A slow guard's answer about an earlier parking of the key (its woken
// execution has since failed and parked the key again, and another guard
// may hold the new claim) changes nothing: it neither clears the other
// guard's claim nor marks the waiting execution lost or resumed.
func TestALateAnswerAboutAnEarlierParkingChangesNothing(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	earlier, now := t0, t0.Add(10*time.Minute)
	reparked := t0.Add(5 * time.Minute)
	for _, c := range []struct {
		name  string
		claim bool // another guard claimed the new parking
	}{
		{"another guard holds the claim of the new parking", true},
		{"the new parking waits for the catch-up", false},
	} {
		for _, a := range []keystore.ResumeAnswer{keystore.ResumeAccepted, keystore.ResumeLost, keystore.ResumeRetry} {
			cur := parkedKeyAt("evt_1", reparked)
			cur.Attempt = 2
			if c.claim {
				cur.ResumeClaimUntil = ptr(now.Add(time.Minute))
			}
			if st, ok := keystore.DecideResumeAnswered(cur, nil, earlier, a, "404 The execution does not exist", now); ok || st.Record != nil || len(st.Events) > 0 {
				t.Errorf("%s, answer %d about the earlier parking: wrote %+v", c.name, a, st.Record)
			}
			// The same answer about the new parking is taken.
			if _, ok := keystore.DecideResumeAnswered(cur, nil, reparked, a, "", now); !ok && (c.claim || a == keystore.ResumeLost) {
				t.Errorf("%s, answer %d about the current parking was refused", c.name, a)
			}
		}
	}
}
