package keystore

import (
	"testing"
	"time"
)

// A parked key whose execution n8n lost, against every reserve a re-send
// from its source can be: it waits for nothing, so it goes through the
// breaker like a new event.
func TestReserveOfALostParkedKey(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0.Add(time.Minute)
	np := Policies{}.Namespace("crm-contacts")
	fp := ClientFingerprint("payload a")
	open := func() *Breaker {
		b := NewBreaker("crm")
		b.State, b.OpenedAt, b.ReopensAt = BreakerOpen, &t0, timePtr(now.Add(time.Hour))
		return b
	}
	lost := func() *Record {
		st, err := DecideReserve(nil, open(), ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Destination: "crm",
			ResumeURL: "http://n8n.local/webhook-waiting/1"}, fp, np, t0)
		if err != nil || st.Record == nil {
			t.Fatalf("fixture: %+v %v", st.Result, err)
		}
		st, ok := DecideResumeAnswered(st.Record, nil, *st.Record.ParkedAt, ResumeLost, "404", t0)
		if !ok {
			t.Fatal("fixture: not lost")
		}
		return st.Record
	}
	for _, c := range []struct {
		name    string
		br      *Breaker
		resume  string
		outcome Outcome
		state   State // "": nothing written
		queued  bool  // parked and waiting for the catch-up (no lost reason)
	}{
		{"paused, re-sent with a new resume_url", open(), "http://n8n.local/webhook-waiting/2", OutcomeParked, StateParked, true},
		{"paused, re-sent without resume_url", open(), "", OutcomeDestinationPaused, "", false},
		{"breaker closed", NewBreaker("crm"), "", OutcomeAccepted, StateReserved, false},
		{"no destination's breaker", nil, "", OutcomeAccepted, StateReserved, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cur := lost()
			st, err := DecideReserve(cur, c.br, ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Destination: "crm", ResumeURL: c.resume}, fp, np, now)
			if err != nil || st.Result.Outcome != c.outcome {
				t.Fatalf("outcome %s (%v), want %s", st.Result.Outcome, err, c.outcome)
			}
			if c.state == "" {
				if st.Record != nil {
					t.Fatalf("wrote %+v", st.Record)
				}
				return
			}
			if st.Record == nil || st.Record.State != c.state {
				t.Fatalf("record %+v, want %s", st.Record, c.state)
			}
			if c.queued && (st.Record.Reason != "" || st.Record.ResumeURL != c.resume) {
				t.Fatalf("parked anew: reason %q, resume URL %q", st.Record.Reason, st.Record.ResumeURL)
			}
			if cur.Reason != ReasonResumeLost {
				t.Fatal("the stored record was changed in place")
			}
		})
	}
}
