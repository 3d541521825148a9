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

// A lost key's owner is told once: another lost answer about the same
// parking (a second guard's late answer, the silent-woken sweep of a
// restarted guard) writes nothing and sends no second event.
func TestALostKeyIsToldOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := NewBreaker("crm")
	b.State, b.OpenedAt, b.ReopensAt = BreakerOpen, &t0, timePtr(t0.Add(time.Hour))
	st, err := DecideReserve(nil, b, ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Destination: "crm",
		ResumeURL: "http://n8n.local/webhook-waiting/1"}, ClientFingerprint("a"), Policies{}.Namespace("crm-contacts"), t0)
	if err != nil || st.Record == nil {
		t.Fatalf("fixture: %+v %v", st.Result, err)
	}
	parkedAt := *st.Record.ParkedAt
	lost, ok := DecideResumeAnswered(st.Record, nil, parkedAt, ResumeLost, "404", t0)
	if !ok || len(lost.Events) != 1 {
		t.Fatalf("first lost answer: %v, events %+v", ok, lost.Events)
	}
	if again, ok := DecideResumeAnswered(lost.Record, nil, parkedAt, ResumeLost, "404 again", t0.Add(time.Minute)); ok || again.Record != nil || len(again.Events) != 0 {
		t.Fatalf("second lost answer wrote %+v, events %+v", again.Record, again.Events)
	}
}

// WokenSilent: only a parked key whose resume n8n accepted at least bound
// ago, not yet lost, not of the approval flow.
func TestWokenSilent(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	bound := 3 * time.Minute
	woken := &Record{State: StateParked, ParkedAt: &t0, ResumeSentAt: timePtr(t0.Add(time.Hour)), Reason: ReasonDestinationUnreachable}
	with := func(f func(r *Record)) *Record { r := woken.Clone(); f(r); return r }
	at := t0.Add(time.Hour + bound)
	for _, c := range []struct {
		name string
		rec  *Record
		now  time.Time
		want bool
	}{
		{"woken, bound passed", woken, at, true},
		{"woken, within the bound", woken, at.Add(-time.Second), false},
		{"claimed, not woken", with(func(r *Record) { r.ResumeSentAt, r.ResumeClaimUntil = nil, timePtr(t0) }), at, false},
		{"already lost", with(func(r *Record) { r.Reason = ReasonResumeLost }), at, false},
		{"approved, woken", with(func(r *Record) { r.Reason = ReasonApproved }), at, true},
		{"approved, woken, within the bound", with(func(r *Record) { r.Reason = ReasonApproved }), at.Add(-time.Second), false},
		{"approved, not woken yet", with(func(r *Record) { r.Reason, r.ResumeSentAt = ReasonApproved, nil }), at, false},
		{"rejected, woken", with(func(r *Record) { r.Reason = ReasonApprovalRejected }), at, false},
		{"awaiting approval", with(func(r *Record) { r.Reason, r.ResumeSentAt = ReasonAwaitingApproval, nil }), at, false},
		{"reserved again", with(func(r *Record) { r.State = StateReserved }), at, false},
		{"none", nil, at, false},
	} {
		if got := WokenSilent(c.rec, bound, c.now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A lost answer applies to a key n8n has not woken; ResumeSilent (the
// runner's finding) only to one it woke: a stale claimant's 404 or 409
// about an execution another guard woke records nothing.
func TestLostAndSilentAnswersKeepToTheirKeys(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	parked := &Record{Namespace: "crm-contacts", Key: "evt_1", State: StateParked, ParkedAt: &t0, Reason: ReasonDestinationUnreachable}
	woken := parked.Clone()
	woken.ResumeSentAt = timePtr(t0.Add(time.Minute))
	approvedWoken := woken.Clone()
	approvedWoken.Reason = ReasonApproved
	for _, c := range []struct {
		name   string
		cur    *Record
		answer ResumeAnswer
		want   bool
	}{
		{"lost, not woken", parked, ResumeLost, true},
		{"lost, woken (a stale claimant's answer)", woken, ResumeLost, false},
		{"silent, woken", woken, ResumeSilent, true},
		{"silent, approved and woken", approvedWoken, ResumeSilent, true},
		{"silent, not woken", parked, ResumeSilent, false},
	} {
		st, ok := DecideResumeAnswered(c.cur, nil, t0, c.answer, "x", t0.Add(time.Hour))
		if ok != c.want || (ok && (st.Record.Reason != ReasonResumeLost || len(st.Events) != 1)) {
			t.Errorf("%s: ok %v, want %v (step %+v)", c.name, ok, c.want, st.Record)
		}
	}
}
