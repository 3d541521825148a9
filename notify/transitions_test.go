package notify

import (
	"testing"
	"time"
)

// The life cycle of a notification, transition by transition: every state
// a notification can be in against every event, straight through the pure
// functions the worker, the click handler and the escalation step call (no
// outbox, no Slack in between), like keystore's machine_test.

var (
	created = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	at      = created.Add(time.Minute) // every event happens at at
	policy  = deliveryPolicy{GroupWindow: 5 * time.Minute, RetryFor: time.Hour,
		Backoff: func(n int) time.Duration { return time.Duration(n) * 10 * time.Second }}
)

func pending() *Record {
	return &Record{Header: Header{ID: "n_1", Kind: KindWorkflowFailed, Status: StatusPending, Count: 1, CreatedAt: created, FirstAt: created},
		Delivery: Delivery{DueAt: created}, Failure: Failure{ExecutionID: "77"}}
}

func delivered() *Record {
	r := pending()
	t := created
	r.Status, r.SlackChannel, r.SlackTS, r.DeliveredAt, r.LastSentAt, r.ShownCount = StatusDelivered, "C1", "1.1", &t, created, 1
	r.Count, r.DueAt = 2, at // a count update is due
	return r
}

func TestAfterCall(t *testing.T) {
	states := map[string]func() *Record{
		"pending":            pending,
		"pending, old":       func() *Record { r := pending(); r.CreatedAt = at.Add(-2 * time.Hour); return r },
		"pending, resent":    func() *Record { r := pending(); r.CreatedAt = at.Add(-2 * time.Hour); r.ResentAt = &created; return r },
		"delivered":          delivered,
		"delivered, stale":   func() *Record { r := delivered(); r.LastSentAt = at.Add(-2 * time.Hour); return r },
		"pending, uncertain": func() *Record { r := pending(); r.PostUncertain, r.UncertainAt = true, created; return r },
	}
	events := map[string]callResult{
		"ok":                      {Class: classOK, Channel: "C1", TS: "1.1"},
		"transient":               {Class: ClassTransient, Reason: "chat.postMessage: fatal_error"},
		"rate limited, 7s":        {Class: ClassRateLimited, Wait: 7 * time.Second, Reason: "chat.postMessage"},
		"rate limited, unsaid":    {Class: ClassRateLimited, Reason: "chat.postMessage"},
		"permanent":               {Class: ClassPermanent, Reason: "chat.postMessage: channel_not_found"},
		"unreachable, maybe sent": {Class: ClassUnreachable, MaybeSent: true},
		"unreachable, not sent":   {Class: ClassUnreachable},
		"canceled":                {Class: classCanceled},
	}
	type want struct {
		effect   callEffect
		status   Status
		due      time.Duration // from at; -1: none
		attempts int           // Attempts (post) or UpdateFailures (update)
	}
	post := func(old bool) map[string]want {
		m := map[string]want{
			"ok":                      {effectDelivered, StatusDelivered, -1, 1},
			"transient":               {effectRetry, StatusPending, 10 * time.Second, 1},
			"rate limited, 7s":        {effectRateLimited, StatusPending, 7 * time.Second, 0},
			"rate limited, unsaid":    {effectRateLimited, StatusPending, 30 * time.Second, 0},
			"permanent":               {effectDead, StatusDead, -1, 1},
			"unreachable, maybe sent": {effectUncertain, StatusPending, -2, 0},
			"unreachable, not sent":   {effectNone, StatusPending, -2, 0},
			"canceled":                {effectNone, StatusPending, -2, 0},
		}
		if old {
			m["transient"] = want{effectDead, StatusDead, -1, 1}
		}
		return m
	}
	update := func(stale bool) map[string]want {
		m := map[string]want{
			"ok":                      {effectShown, StatusDelivered, -1, 0},
			"transient":               {effectRetry, StatusDelivered, 10 * time.Second, 1},
			"rate limited, 7s":        {effectRateLimited, StatusDelivered, 7 * time.Second, 0},
			"rate limited, unsaid":    {effectRateLimited, StatusDelivered, 30 * time.Second, 0},
			"permanent":               {effectUpdateRefused, StatusDelivered, -1, 0},
			"unreachable, maybe sent": {effectNone, StatusDelivered, -2, 0},
			"unreachable, not sent":   {effectNone, StatusDelivered, -2, 0},
			"canceled":                {effectNone, StatusDelivered, -2, 0},
		}
		if stale {
			m["transient"] = want{effectUpdateGaveUp, StatusDelivered, -1, 1}
		}
		return m
	}
	table := map[string]map[string]want{
		"pending": post(false), "pending, old": post(true), "pending, resent": post(false), "pending, uncertain": post(false),
		"delivered": update(false), "delivered, stale": update(true),
	}
	for sname, mk := range states {
		for ename, ev := range events {
			t.Run(sname+" / "+ename, func(t *testing.T) {
				w := table[sname][ename]
				cur := mk()
				ev.Update = cur.Status == StatusDelivered
				before := *cur
				next, e := afterCall(cur, cur, ev, at, policy)
				if cur.DueAt != before.DueAt || cur.Status != before.Status || cur.Attempts != before.Attempts {
					t.Fatal("AfterCall changed its input")
				}
				if e != w.effect {
					t.Fatalf("effect %d, want %d", e, w.effect)
				}
				if w.due == -2 { // nothing saved, but an uncertain post is marked
					if e == effectUncertain {
						if next == nil || !next.PostUncertain || next.Status != StatusPending {
							t.Fatalf("uncertain post not marked: %+v", next)
						}
						return
					}
					if next != nil {
						t.Fatalf("saved %+v; want nothing", next)
					}
					return
				}
				if next.Status != w.status {
					t.Fatalf("status %s, want %s", next.Status, w.status)
				}
				got := next.Attempts
				if ev.Update {
					got = next.UpdateFailures
				}
				if got != w.attempts {
					t.Fatalf("attempts %d, want %d", got, w.attempts)
				}
				switch {
				case w.due == -1 && ev.Update && ev.Class == classOK:
					// The count grew during the call: due again after half a window.
				case w.due == -1 && !next.DueAt.IsZero():
					t.Fatalf("due at %s, want none", next.DueAt)
				case w.due >= 0 && !next.DueAt.Equal(at.Add(w.due)):
					t.Fatalf("due at %s, want %s", next.DueAt, at.Add(w.due))
				}
				if ev.Class == classOK && !ev.Update && (next.SlackTS != "1.1" || next.PostUncertain || next.DeliveredAt == nil) {
					t.Fatalf("delivered without where: %+v", next.Delivery)
				}
			})
		}
	}
}

// What Slack shows changes while the call was out: the count grew, a
// decision came. The message is due again.
func TestAfterCallSeesChangesDuringTheCall(t *testing.T) {
	sent := delivered()
	cur := delivered()
	cur.Count = 5
	next, _ := afterCall(cur, sent, callResult{Update: true, Class: classOK}, at, policy)
	if !next.DueAt.Equal(at.Add(policy.GroupWindow/2)) || next.ShownCount != sent.Count {
		t.Fatalf("count grew: due %s, shown %d", next.DueAt, next.ShownCount)
	}
	cur = decide(delivered(), DecisionAcknowledged, "U1", "", at, false)
	next, _ = afterCall(cur, sent, callResult{Update: true, Class: classOK}, at, policy)
	if !next.DueAt.Equal(at) {
		t.Fatalf("a decision during the call: due %s, want now", next.DueAt)
	}
}

func TestDecide(t *testing.T) {
	for _, d := range []string{DecisionAcknowledged, DecisionSnoozed, DecisionCompleted, DecisionRetry, DecisionRetried} {
		for _, escalation := range []bool{false, true} {
			cur := delivered()
			esc := at.Add(time.Hour)
			cur.EscalateAt = &esc
			next := decide(cur, d, "U1", "x", at, escalation)
			if next.Decision != d || next.DecidedBy != "U1" || next.Version != cur.Version+1 || !next.DueAt.Equal(at) {
				t.Fatalf("%s: %+v", d, next.Decided)
			}
			switch {
			case escalation && next.EscalateAt != cur.EscalateAt && !next.EscalateAt.Equal(*cur.EscalateAt):
				t.Fatalf("%s on an escalation moved its schedule", d)
			case !escalation && d == DecisionSnoozed && (next.EscalateAt == nil || !next.EscalateAt.Equal(at.Add(snoozeFor))):
				t.Fatalf("snooze: escalation at %v", next.EscalateAt)
			case !escalation && d != DecisionSnoozed && next.EscalateAt != nil:
				t.Fatalf("%s: escalation goes on", d)
			}
		}
	}
}

func TestResolvedElsewhere(t *testing.T) {
	for _, before := range []string{"", DecisionSnoozed, DecisionAcknowledged, DecisionCompleted, DecisionRetry} {
		for _, completed := range []bool{true, false} {
			cur := delivered()
			cur.Decision = before
			esc := at
			cur.EscalateAt = &esc
			next := resolvedElsewhere(cur, completed, "office manager", created, at)
			want := map[bool]string{true: DecisionCompleted, false: DecisionRetry}[completed]
			if before == DecisionCompleted || before == DecisionRetry {
				want = before // the first decider stays
			}
			if next.Decision != want || next.EscalateAt != nil {
				t.Fatalf("%q then resolved (completed %v): %q, escalation %v", before, completed, next.Decision, next.EscalateAt)
			}
			if want != before && (next.DecidedByName != "office manager" || !next.DueAt.Equal(at) || next.Version != cur.Version+1) {
				t.Fatalf("the message does not say who: %+v", next.Decided)
			}
		}
	}
}

func TestAtEscalation(t *testing.T) {
	steps := []EscalationStep{{After: 30 * time.Minute, To: "U0BOSS"}, {After: time.Hour, To: "C0INCIDENT"}}
	now := created.Add(31 * time.Minute)
	cases := []struct {
		name  string
		set   func(r *Record)
		taken stepTaken
		step  int
		to    string // owner or channel of the message
		next  time.Duration
	}{
		{"acknowledged", func(r *Record) { r.Decision = DecisionAcknowledged }, stepNone, 0, "", -1},
		{"snoozed", func(r *Record) { r.Decision = DecisionSnoozed; r.Owner = "U0OWNER" }, stepReminder, 0, "U0OWNER", 30 * time.Minute},
		{"undecided, first step", func(r *Record) {}, stepEscalated, 1, "U0BOSS", 29 * time.Minute},
		{"undecided, last step", func(r *Record) { r.EscalationStep = 1 }, stepEscalated, 2, "C0INCIDENT", -1},
		{"undecided, no step left", func(r *Record) { r.EscalationStep = 2 }, stepNone, 2, "", -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := delivered()
			due := now
			cur.EscalateAt = &due
			tc.set(cur)
			next, msg, taken := atEscalation(cur, steps, now)
			if taken != tc.taken || next.EscalationStep != tc.step {
				t.Fatalf("taken %d step %d", taken, next.EscalationStep)
			}
			switch {
			case tc.next < 0 && next.EscalateAt != nil:
				t.Fatalf("escalation goes on at %s", next.EscalateAt)
			case tc.next >= 0 && (next.EscalateAt == nil || !next.EscalateAt.Equal(now.Add(tc.next))):
				t.Fatalf("next step at %v, want %s", next.EscalateAt, now.Add(tc.next))
			}
			if tc.to == "" {
				if msg != nil {
					t.Fatalf("a message: %+v", msg)
				}
				return
			}
			if msg == nil || msg.Kind != KindEscalation || msg.EscalationOf != cur.ID || (msg.Owner != tc.to && msg.Channel != tc.to) ||
				len(next.Escalations) != 1 || next.Escalations[0] != msg.ID || msg.Status != StatusPending {
				t.Fatalf("message %+v, escalations %v", msg, next.Escalations)
			}
			if tc.taken == stepReminder && (next.Decision != "" || next.Version != cur.Version+1) {
				t.Fatalf("the snooze is over but the message keeps it: %+v", next.Decided)
			}
		})
	}
}

func TestResend(t *testing.T) {
	now := Target{Owner: "U0NEW", Channel: "C0NEW", Runbook: "Invite the bot first."}
	for _, s := range []Status{StatusPending, StatusDelivered, StatusDead} {
		cur := pending()
		cur.Status, cur.Attempts, cur.DueAt = s, 5, time.Time{}
		cur.Owner, cur.Channel, cur.PostUncertain = "U0OLD", "C0GONE", true
		next, ok := resend(cur, at, now)
		if ok != (s == StatusDead) {
			t.Fatalf("%s: resent %v", s, ok)
		}
		if ok && (next.Status != StatusPending || next.Attempts != 0 || !next.DueAt.Equal(at) || next.ResentAt == nil) {
			t.Fatalf("resent: %+v", next)
		}
		// Routed again: the channel of the current configuration, not the
		// one stored when it was made (which is what failed).
		if ok && (next.Channel != "C0NEW" || next.Owner != "U0NEW" || next.Runbook != now.Runbook || next.PostUncertain) {
			t.Fatalf("resent to %s/%s (uncertain %v), want C0NEW/U0NEW", next.Channel, next.Owner, next.PostUncertain)
		}
		if !ok && (next.Channel != "C0GONE" || cur.Channel != "C0GONE") {
			t.Fatalf("%s: not resent, yet rerouted", s)
		}
	}
}
