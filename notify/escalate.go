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
	s.settledElsewhere(ctx, now)
	n, err := s.outbox.Escalate(ctx, now, dueBatch, func(r *Record) *Record {
		next, msg, taken := atEscalation(r, s.cfg.routeFor(r).Escalation, now)
		*r = *next
		if taken == stepEscalated {
			s.m.escalated.Inc()
			s.log.Info("escalating: nobody acknowledged a notification", "id", r.ID, "kind", r.Kind, "step", r.EscalationStep,
				"to", s.cfg.routeFor(r).Escalation[r.EscalationStep-1].To)
		}
		return msg
	})
	if err != nil {
		s.log.Error("escalating unacknowledged notifications failed; will retry", "err", err)
		return
	}
	if n > 0 {
		s.poke()
	}
}

// settledElsewhere stops the escalation of stuck keys that were resolved
// without the buttons and whose key-resolved event was missed (written by
// a guard older than the event): a person decided, so nobody more needs
// to hear. The keystore is read here, outside any outbox transaction.
func (s *Service) settledElsewhere(ctx context.Context, now time.Time) {
	if s.opts.Keys == nil {
		return
	}
	due, err := s.outbox.Escalating(ctx, now, dueBatch)
	if err != nil {
		return // Escalate reports the outbox's failure
	}
	for _, r := range due {
		if r.Kind != KindKeyUnknown || r.Acknowledged() || r.IsKeyGroup() {
			continue
		}
		res, err := s.opts.Keys.Lookup(ctx, r.Namespace, r.Key)
		if err != nil || (res.Record != nil && res.Record.State == keystore.StateUnknown) {
			continue
		}
		s.ResolvedElsewhere(ctx, r, res.Record, now)
	}
}

// ResolvedElsewhere records on the notification (and its escalation
// messages) that its key was decided without its buttons: escalation
// stops and the messages show who decided (the buttons go).
func (s *Service) ResolvedElsewhere(ctx context.Context, r *Record, rec *keystore.Record, now time.Time) {
	completed, by, at := true, "", now
	if rec != nil {
		completed = rec.State == keystore.StateCompleted
		by = rec.ResolvedBy
		if rec.ResolvedAt != nil {
			at = *rec.ResolvedAt
		}
	}
	s.decidedElsewhere(ctx, r.ID, completed, by, at, now)
}

func (s *Service) decidedElsewhere(ctx context.Context, id string, completed bool, by string, at, now time.Time) {
	updated, err := s.outbox.Update(ctx, id, func(x *Record) { *x = *resolvedElsewhere(x, completed, by, at, now) })
	if err != nil {
		s.log.Warn("recording that a key was resolved elsewhere failed", "id", id, "err", err)
		return
	}
	if updated != nil {
		s.updateEscalations(ctx, updated, func(x *Record) *Record { return resolvedElsewhere(x, completed, by, at, now) })
	}
	s.poke()
}
