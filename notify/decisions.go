package notify

import (
	"context"
)

// What a person's decision changes on the notifications, for
// notify/decision, which carries out the clicks and the console's
// decisions: each write goes through the pure functions of
// transitions.go and group.go, and wakes the worker, which shows it in
// Slack.

// RecordDecision records decision on notification id and on every
// escalation message about it: taken in Slack by user (a Slack user ID),
// or elsewhere by byName; retriedAs is the execution a retry started. It
// returns the notification as saved, nil when it is gone.
func (s *Service) RecordDecision(ctx context.Context, id, decision, user, byName, retriedAs string) (*Record, error) {
	defer s.poke()
	now := s.now()
	next := func(x *Record, escalation bool) *Record {
		x = decide(x, decision, user, retriedAs, now, escalation)
		x.DecidedByName = byName
		return x
	}
	updated, err := s.outbox.Update(ctx, id, func(x *Record) { *x = *next(x, false) })
	if err != nil || updated == nil {
		return nil, err
	}
	s.updateEscalations(ctx, updated, func(x *Record) *Record { return next(x, true) })
	return updated, nil
}

// RecordGroupDecision records decision taken by user for the whole group
// of notification id: bulk names it in the keys' history, decided keys
// took it, skipped ones were decided already.
func (s *Service) RecordGroupDecision(ctx context.Context, id, decision, user, bulk string, decided, skipped int) error {
	defer s.poke()
	now := s.now()
	_, err := s.outbox.Update(ctx, id, func(x *Record) {
		*x = *groupDecided(x, decision, user, bulk, decided, skipped, now)
	})
	return err
}

// SettleMember counts a key of a group whose attempt is over (purged, or
// a later attempt began) as decided: no key-resolved event will count it.
func (s *Service) SettleMember(ctx context.Context, m Member) error {
	now := s.now()
	_, err := s.outbox.Settle(ctx, m, func(x *Record) {
		*x = *keySettled(x, true, "", now, now, s.cfg.GroupWindow)
	})
	return err
}

// CallSlack makes one Slack call of a click (method names it in the
// metrics) as the worker makes its own: not while Slack is paused after
// it was unreachable, and an unreachable Slack pauses every call.
func (s *Service) CallSlack(ctx context.Context, method string, fn func() error) error {
	_, _, err := s.call(ctx, method, fn)
	return err
}

// ConsoleURL is where people open the guard: public_url, else guard_url
// ("" when neither is set).
func (s *Service) ConsoleURL() string { return cmpOr(s.cfg.PublicURL, s.cfg.GuardURL) }

// updateEscalations applies next to every escalation message of r; they
// carry r's version, which their buttons act on.
func (s *Service) updateEscalations(ctx context.Context, r *Record, next func(*Record) *Record) {
	for _, id := range r.Escalations {
		if _, err := s.outbox.Update(ctx, id, func(x *Record) {
			*x = *next(x)
			x.Version = r.Version
		}); err != nil {
			s.log.Warn("updating an escalation message failed", "id", id, "err", err)
		}
	}
}
