package notify

import (
	"context"
	"fmt"

	"github.com/n8n-guard/n8n-guard/keystore"
)

const eventBatch = 100

// consumeEvents turns new keystore events into notifications. The cursor
// is saved in the same transaction as the notifications, so a restart
// neither loses nor repeats an alert.
func (s *Service) consumeEvents(ctx context.Context) {
	if s.opts.Events == nil {
		return
	}
	for ctx.Err() == nil {
		n, err := s.consumeBatch(ctx)
		if err != nil {
			if !s.eventsFault && ctx.Err() == nil {
				s.log.Error("reading keystore events failed; will retry", "err", err)
			}
			s.eventsFault = true
			return
		}
		if s.eventsFault {
			s.log.Info("reading keystore events works again")
			s.eventsFault = false
		}
		if n < eventBatch {
			return
		}
	}
}

func (s *Service) consumeBatch(ctx context.Context) (int, error) {
	cur, err := s.outbox.EventCursor(ctx)
	if err != nil {
		return 0, err
	}
	evs, err := s.opts.Events.Events(ctx, cur, eventBatch)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	var adds []addition
	last := cur
	for _, ev := range evs {
		if ev.Seq <= last {
			continue // never go back
		}
		last = ev.Seq
		if a, ok := s.fromEvent(ev); ok {
			adds = append(adds, a)
		}
	}
	res, err := s.outbox.Add(ctx, adds, &last)
	if err != nil {
		return 0, fmt.Errorf("store notifications of events: %w", err)
	}
	for _, a := range res {
		if a.skipped {
			continue
		}
		status := "queued"
		if a.joined {
			status = "grouped"
		}
		s.m.accepted.WithLabelValues(string(a.rec.Kind), status).Inc()
	}
	s.poke()
	return len(evs), nil
}

// kindOf maps the key domain's event kinds to the notifications they make:
// said, not cast, so a kind renamed on either side cannot slip through.
func kindOf(k keystore.EventKind) (Kind, bool) {
	switch k {
	case keystore.EventKeyUnknown:
		return KindKeyUnknown, true
	case keystore.EventBreakerOpened:
		return KindBreakerOpened, true
	case keystore.EventBreakerClosed:
		return KindBreakerClosed, true
	}
	return "", false
}

// fromEvent builds the notification of one event; the owner comes from the
// namespace (stuck keys) or the destination (breakers) in the config.
func (s *Service) fromEvent(ev keystore.Event) (addition, bool) {
	now := s.now()
	at := ev.At
	if at.IsZero() {
		at = now
	}
	kind, ok := kindOf(ev.Kind)
	if !ok {
		return addition{}, false
	}
	rec := &record{
		ID: newID(now), Kind: kind, Status: StatusPending, Count: 1,
		FirstAt: at, LastAt: at, CreatedAt: now, DueAt: now, EventSeq: ev.Seq,
		Reason: string(ev.Reason), Message: clean(ev.Message, maxMessageRunes),
	}
	switch ev.Kind {
	case keystore.EventKeyUnknown:
		rt := s.cfg.forRoute(s.cfg.Namespaces, ev.Namespace)
		rec.Owner, rec.Channel, rec.Runbook = rt.Owner, rt.Channel, rt.Runbook
		rec.Namespace, rec.Key, rec.KeyAttempt = ev.Namespace, truncate(ev.Key, 255), ev.Attempt
		rec.Holder = clean(ev.Owner, 128)
		rec.EscalateAt = firstEscalation(rt, at)
		// Many keys of one namespace going unknown at once (the target went
		// down) make one message whose count says how many.
		rec.Group = groupOf(string(ev.Kind), ev.Namespace)
		once := fmt.Sprintf("%s\x00%s\x00%s\x00%d", ev.Kind, ev.Namespace, ev.Key, ev.Attempt)
		return addition{rec: rec, window: s.cfg.GroupWindow, once: once}, true
	case keystore.EventBreakerOpened, keystore.EventBreakerClosed:
		rt := s.cfg.forRoute(s.cfg.Destinations, ev.Destination)
		rec.Owner, rec.Channel, rec.Runbook = rt.Owner, rt.Channel, rt.Runbook
		rec.Destination, rec.PausedReserves = ev.Destination, ev.PausedReserves
		if ev.ReopensAt != nil {
			t := *ev.ReopensAt
			rec.ReopensAt = &t
		}
		rec.Group = groupOf(string(ev.Kind), ev.Destination, fmt.Sprint(ev.Seq))
		return addition{rec: rec, once: fmt.Sprintf("%s\x00%s\x00%d", ev.Kind, ev.Destination, ev.Seq)}, true
	}
	return addition{}, false
}
