package notify

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
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
	s.settledElsewhere(ctx, now)
	n, err := s.outbox.Escalate(ctx, now, dueBatch, func(r *record) *record { return s.nextStep(r, now) })
	if err != nil {
		s.log.Error("escalating unacknowledged notifications failed; will retry", "err", err)
		return
	}
	if n > 0 {
		s.poke()
	}
}

// settledElsewhere stops the escalation of stuck keys that were resolved
// without the buttons (CLI, API, another message): a person decided, so
// nobody more needs to hear. The keystore is read here, outside any
// outbox transaction. The message then shows who decided.
func (s *Service) settledElsewhere(ctx context.Context, now time.Time) {
	if s.opts.Keys == nil {
		return
	}
	due, err := s.outbox.Escalating(ctx, now, dueBatch)
	if err != nil {
		return // Escalate reports the outbox's failure
	}
	for _, r := range due {
		if r.Kind != KindKeyUnknown || r.acknowledged() {
			continue
		}
		res, err := s.opts.Keys.Lookup(ctx, r.Namespace, r.Key)
		if err != nil || (res.Record != nil && res.Record.State == keystore.StateUnknown) {
			continue
		}
		s.resolvedElsewhere(ctx, r, res.Record, now)
	}
}

// resolvedElsewhere records on the notification that its key was decided
// without its buttons: escalation stops and the message shows who decided
// (the buttons go).
func (s *Service) resolvedElsewhere(ctx context.Context, r *record, rec *keystore.Record, now time.Time) {
	decision, by, at := DecisionCompleted, "", now
	if rec != nil {
		if rec.State != keystore.StateCompleted {
			decision = DecisionRetry
		}
		by = rec.ResolvedBy
		if rec.ResolvedAt != nil {
			at = *rec.ResolvedAt
		}
	}
	if _, err := s.outbox.Update(ctx, r.ID, func(x *record) {
		x.EscalateAt = nil
		if x.Decision == "" || x.Decision == DecisionSnoozed {
			x.Decision, x.DecidedBy, x.DecidedByName, x.DecidedAt, x.SnoozedUntil = decision, "", cmpOr(by, "someone outside Slack"), &at, nil
			if x.Status == StatusDelivered && x.SlackTS != "" {
				x.DueAt = now
			}
		}
	}); err != nil {
		s.log.Warn("recording that a key was resolved elsewhere failed", "id", r.ID, "err", err)
	}
	s.poke()
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
		return Notification{}, &errs.Error{Code: errs.InvalidRequest, Message: "id is not a notification id (n_…)",
			Fields: []errs.FieldError{{Field: "id", Rule: "notification_id"}}}
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
		return Notification{}, errs.Errorf(errs.NotFound, "no notification %s", id)
	}
	if was != StatusDead {
		return Notification{}, errs.Errorf(errs.Conflict, "notification %s is %s, not dead: only dead notifications are resent", id, was)
	}
	s.m.resent.Inc()
	s.log.Info("dead notification queued again by an operator", "id", id)
	s.poke()
	return r.item(), nil
}
