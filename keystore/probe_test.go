package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The probe is the oldest waiting event: once a paused destination's
// cooldown has passed, an event that arrives with a resume URL parks
// behind the events that waited through the outage instead of testing the
// destination ahead of them; the catch-up's claim of the oldest becomes
// the probe, and its woken execution's reserve goes through. A reserve
// that cannot wait (no resume URL) still probes, as before. The same
// holds for a destination paused for one namespace alone.
func TestANewEventAfterTheCooldownParksBehindTheWaitingOnes(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reopens := t0.Add(time.Minute)
	after := reopens.Add(time.Second)
	np := keystore.Policies{}.Namespace("crm-contacts")
	openFor := map[string]func() *keystore.Breaker{
		"for every namespace": func() *keystore.Breaker {
			b := keystore.NewBreaker("crm")
			b.State, b.OpenedAt, b.ReopensAt = keystore.BreakerOpen, &t0, &reopens
			return b
		},
		"for its namespace alone": func() *keystore.Breaker {
			b := keystore.NewBreaker("crm")
			b.Views = []keystore.BreakerView{{Namespace: "crm-contacts", State: keystore.BreakerOpen, OpenedAt: &t0, ReopensAt: &reopens}}
			return b
		},
	}
	reserve := func(t *testing.T, cur *keystore.Record, b *keystore.Breaker, key, resumeURL string, at time.Time) keystore.Step {
		t.Helper()
		s, err := keystore.DecideReserve(cur, b, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Owner: "wf-1 exec " + key,
			Destination: "crm", ResumeURL: resumeURL}, keystore.ClientFingerprint(key), np, at)
		if err != nil {
			t.Fatalf("reserve %s: %v", key, err)
		}
		return s
	}
	for name, open := range openFor {
		t.Run(name, func(t *testing.T) {
			// The oldest event parked during the outage.
			old := reserve(t, nil, open(), "evt_old", "http://n8n.local/webhook-waiting/1", t0.Add(time.Second))
			if old.Result.Outcome != keystore.OutcomeParked {
				t.Fatalf("during the cooldown: %s, want parked", old.Result.Outcome)
			}

			// A new event just after the cooldown parks; nobody probes yet.
			s := reserve(t, nil, open(), "evt_new", "http://n8n.local/webhook-waiting/2", after)
			if s.Result.Outcome != keystore.OutcomeParked || s.Record == nil || s.Record.State != keystore.StateParked {
				t.Fatalf("a new event after the cooldown: %s %+v, want parked behind the waiting ones", s.Result.Outcome, s.Record)
			}
			b := s.Breaker
			if b == nil {
				b = open()
			}
			if b.State == keystore.BreakerHalfOpen || b.ProbeKey != "" || len(b.Views) > 0 && b.Views[0].ProbeKey != "" {
				t.Fatalf("the new event became the probe: %+v", b)
			}

			// The catch-up claims the oldest: it is the probe, and its
			// woken execution's reserve goes through.
			cs, ok := keystore.DecideClaimResume(old.Record, b, time.Minute, np, after)
			if !ok {
				t.Fatal("the oldest waiting event was not claimed as the probe")
			}
			woken := *cs.Record
			woken.ResumeSentAt = &after // the resume call went out
			probe := cs.Breaker
			if r := reserve(t, &woken, probe, "evt_old", "", after.Add(time.Second)); r.Result.Outcome != keystore.OutcomeAccepted {
				t.Fatalf("the probe's own reserve: %s, want accepted", r.Result.Outcome)
			}

			// While the probe is out, another new event still parks.
			if r := reserve(t, nil, probe, "evt_newer", "http://n8n.local/webhook-waiting/3", after.Add(time.Second)); r.Result.Outcome != keystore.OutcomeParked {
				t.Fatalf("a new event while the probe is out: %s, want parked", r.Result.Outcome)
			}
		})
	}

	// A reserve without a resume URL cannot wait in line: it probes.
	b := openFor["for every namespace"]()
	if s := reserve(t, nil, b, "evt_plain", "", after); s.Result.Outcome != keystore.OutcomeAccepted || s.Breaker == nil || s.Breaker.ProbeKey != "evt_plain" {
		t.Fatalf("a reserve without a resume URL after the cooldown: %s, want accepted as the probe", s.Result.Outcome)
	}
}
