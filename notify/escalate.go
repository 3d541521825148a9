package notify

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// firstEscalation is when a new notification escalates if nobody
// acknowledges it; nil without escalation steps.
func firstEscalation(rt route, from time.Time) *time.Time {
	if len(rt.Escalation) == 0 {
		return nil
	}
	t := from.Add(rt.Escalation[0].After)
	return &t
}

// escalate takes the escalation steps that are due. The deadline is
// stored with the notification, so it survives restarts; the outbox takes
// each step in one transaction with the new message, so it happens once.
func (s *Service) escalate(ctx context.Context) {
	now := s.now()
	n, err := s.outbox.Escalate(ctx, now, dueBatch, func(r *record) *record { return s.nextStep(r, now) })
	if err != nil {
		s.log.Error("escalating unacknowledged notifications failed; will retry", "err", err)
		return
	}
	if n > 0 {
		s.poke()
	}
}

// nextStep moves r to its next escalation step and returns the message
// for it (nil: none, escalation over).
func (s *Service) nextStep(r *record, now time.Time) *record {
	if r.acknowledged() {
		r.EscalateAt = nil
		return nil
	}
	rt := s.cfg.routeFor(r)
	if r.Decision == DecisionSnoozed {
		// The snooze is over: the message gets its buttons back and the
		// owner a reminder; the next step follows after its usual gap,
		// counted from now.
		r.Decision, r.DecidedBy, r.DecidedAt, r.SnoozedUntil = "", "", nil, nil
		if r.Status == StatusDelivered && r.SlackTS != "" {
			r.DueAt = now
		}
		r.EscalateAt = nil
		if i := r.EscalationStep; i < len(rt.Escalation) {
			gap := rt.Escalation[i].After
			if i > 0 {
				gap -= rt.Escalation[i-1].After
			}
			t := now.Add(gap)
			r.EscalateAt = &t
		}
		return s.escalation(r, now, r.Owner, r.Channel, "the snooze is over")
	}
	if r.EscalationStep >= len(rt.Escalation) {
		r.EscalateAt = nil
		return nil
	}
	st := rt.Escalation[r.EscalationStep]
	r.EscalationStep++
	r.EscalateAt = nextEscalation(r, rt, now)
	owner, channel := st.To, r.Channel
	if channelIDRE.MatchString(st.To) {
		owner, channel = "", st.To
	}
	s.m.escalated.Inc()
	s.log.Info("escalating: nobody acknowledged a notification", "id", r.ID, "kind", r.Kind, "step", r.EscalationStep, "to", st.To)
	return s.escalation(r, now, owner, channel, "nobody acknowledged it for "+humanDuration(now.Sub(r.FirstAt)))
}

func nextEscalation(r *record, rt route, now time.Time) *time.Time {
	if r.EscalationStep >= len(rt.Escalation) {
		return nil
	}
	t := later(now, r.FirstAt.Add(rt.Escalation[r.EscalationStep].After))
	return &t
}

// escalation is a new message about r for owner in channel. Its buttons
// act on r.
func (s *Service) escalation(r *record, now time.Time, owner, channel, why string) *record {
	e := *r
	e.ID, e.Kind, e.Status, e.EscalationOf = newID(now), KindEscalation, StatusPending, r.ID
	e.Owner, e.Channel, e.Reason = owner, channel, why
	e.Holder = r.Owner // whom it was for first
	e.Group, e.GroupEnd = "", time.Time{}
	e.CreatedAt, e.DueAt, e.DeliveredAt, e.LastSentAt = now, now, nil, time.Time{}
	e.Attempts, e.UpdateFailures, e.LastFailure, e.SlackChannel, e.SlackTS, e.ShownCount = 0, 0, "", "", "", 0
	e.PostUncertain, e.EscalateAt, e.EscalationStep, e.Escalations = false, nil, 0, nil
	e.EventSeq = 0
	e.EscalatedKind = r.Kind
	r.Escalations = append(r.Escalations, e.ID)
	return &e
}

// Resend queues a dead notification again, after the cause (a channel,
// the token) was fixed: attempts start over and the worker posts it.
func (s *Service) Resend(ctx context.Context, id string) (Notification, error) {
	if !cursorRE.MatchString(id) {
		return Notification{}, &keystore.Error{Code: keystore.EInvalidRequest, Message: "id is not a notification id (n_…)",
			Fields: []keystore.FieldError{{Field: "id", Rule: "notification_id"}}}
	}
	now := s.now()
	var was Status
	r, err := s.outbox.Update(ctx, id, func(x *record) {
		was = x.Status
		if x.Status != StatusDead {
			return
		}
		t := now
		x.Status, x.Attempts, x.UpdateFailures, x.DueAt, x.ResentAt = StatusPending, 0, 0, now, &t
		x.LastFailure = "resent by an operator after: " + x.LastFailure
	})
	if err != nil {
		return Notification{}, err
	}
	if r == nil {
		return Notification{}, keystore.Errorf(keystore.ENotFound, "no notification %s", id)
	}
	if was != StatusDead {
		return Notification{}, keystore.Errorf(keystore.EConflict, "notification %s is %s, not dead: only dead notifications are resent", id, was)
	}
	s.m.resent.Inc()
	s.log.Info("dead notification queued again by an operator", "id", id)
	s.poke()
	return r.item(), nil
}
