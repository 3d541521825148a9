package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
)

const (
	dueBatch   = 50
	maxPerPass = 1000
	// transientPauseMax bounds the pause of delivery while Slack answers
	// with faults (5xx): recovery is seen within about a minute.
	transientPauseMax = time.Minute
)

// deliver is one pass over the due notifications. It stops at the first
// sign that Slack is unreachable (every call then waits for the pause to
// end) or rate limited, and logs at most one line about it.
func (s *Service) deliver(ctx context.Context) {
	defer s.updateWaiting(ctx)
	if s.slack == nil || ctx.Err() != nil {
		return
	}
	now := s.now()
	if now.Before(s.notBefore) || !s.pause.allow(now) {
		return
	}
	for done := 0; done < maxPerPass; {
		due, err := s.outbox.Due(ctx, now, dueBatch)
		if err != nil {
			s.log.Error("reading the outbox failed", "err", err)
			return
		}
		if len(due) == 0 {
			return
		}
		for _, r := range due {
			if s.send(ctx, r) {
				return
			}
			done++
		}
		now = s.now()
	}
}

func (s *Service) updateWaiting(ctx context.Context) {
	if n, err := s.outbox.Waiting(ctx); err == nil {
		s.m.waiting.Set(float64(n))
	}
}

// call runs one Slack call through the pause and counts it.
func (s *Service) call(ctx context.Context, method string, fn func() error) (Class, time.Duration, error) {
	if !s.pause.allow(s.now()) {
		return ClassUnreachable, 0, errPaused
	}
	err := fn()
	c, wait := classify(ctx, err)
	switch c {
	case classCanceled:
	case ClassUnreachable:
		s.pause.unreachable(s.now())
	default:
		if s.pause.answered() {
			s.log.Info("Slack reachable again, delivering waiting notifications")
		}
	}
	s.m.slackCalls.WithLabelValues(method, c.String()).Inc()
	return c, wait, err
}

// send makes the one Slack call r is due for and records the result. It
// reports whether the pass must stop.
func (s *Service) send(ctx context.Context, r *Record) (stop bool) {
	update := r.Status == StatusDelivered && r.SlackTS != ""
	if r.Status == StatusDead || (r.Status == StatusDelivered && !update) {
		// Nothing to send; clear a stale schedule.
		_, err := s.outbox.Update(ctx, r.ID, func(c *Record) { c.DueAt = time.Time{} })
		return err != nil
	}
	mention, userID, c, wait, err := s.owner(ctx, r.Owner)
	if c != classOK {
		return s.settle(ctx, r, "users.lookupByEmail", callResult{Update: update, Class: c, Wait: wait}, err)
	}
	msg := Message{Record: r, Mention: mention, GuardURL: cmpOr(s.cfg.GuardURL, s.cfg.PublicURL), CanRetry: s.retryOffered(ctx, r),
		Links: consoleLinks(r, s.cfg.PublicURL)}
	if r.Kind == KindApproval {
		msg.Approvers = s.cfg.approvalRoute(r.Namespace).Resolvers
	}
	if update {
		c, wait, err = s.call(ctx, "chat.update", func() error { return s.slack.Update(ctx, r.SlackChannel, r.SlackTS, msg) })
		return s.settle(ctx, r, "chat.update", callResult{Update: true, Class: c, Wait: wait}, err)
	}
	channel := cmpOr(r.Channel, userID) // no channel: a direct message from the app
	if channel == "" {
		err := errors.New("no channel: set notify.default_channel or a channel on the owner rule")
		return s.settle(ctx, r, "chat.postMessage", callResult{Class: ClassPermanent}, err)
	}
	if r.PostUncertain {
		ts, found, c, wait, err := s.landed(ctx, channel, r)
		if c == classOK && found {
			return s.settle(ctx, r, "conversations.history", callResult{Class: classOK, Channel: channel, TS: ts}, nil)
		}
		if c != classOK && c != ClassPermanent {
			return s.settle(ctx, r, "conversations.history", callResult{Class: c, Wait: wait}, err)
		}
		// Not there (or the history cannot be read): post.
	}
	var ch, ts string
	c, wait, err = s.call(ctx, "chat.postMessage", func() error {
		var err error
		ch, ts, err = s.slack.Post(ctx, channel, msg)
		return err
	})
	return s.settle(ctx, r, "chat.postMessage", callResult{Class: c, Wait: wait, MaybeSent: maybeSent(err), Channel: ch, TS: ts}, err)
}

// landed looks for r's message in the channel's recent history: an
// earlier post of it got no answer.
func (s *Service) landed(ctx context.Context, channel string, r *Record) (ts string, found bool, c Class, wait time.Duration, err error) {
	// From just before the first post that got no answer.
	c, wait, err = s.call(ctx, "conversations.history", func() error {
		var err error
		ts, found, err = s.slack.Find(ctx, channel, r.ID, r.UncertainAt.Add(-time.Minute))
		return err
	})
	if c == ClassPermanent {
		s.log.Warn("cannot read the channel to check whether a timed-out post landed; posting again",
			"id", r.ID, "channel", channel, "reason", SlackReason(err), "hint", "give the app the channels:history scope")
	}
	return ts, found, c, wait, err
}

// settle records the result of a Slack call (afterCall decides) and says
// it; it reports whether the pass stops.
func (s *Service) settle(ctx context.Context, r *Record, method string, res callResult, err error) (stop bool) {
	now := s.now()
	res.Reason = method + ": " + SlackReason(err)
	if res.Class == ClassUnreachable && method != "chat.postMessage" {
		res.MaybeSent = false
	}
	o := outcome{callResult: res, method: method, err: err}
	if !s.save(ctx, r, &o, now) {
		return true
	}
	return s.report(ctx, r, o, now)
}

// outcome is one Slack call as the worker reports it.
type outcome struct {
	callResult
	method string
	err    error
	effect callEffect // what afterCall did
}

// save applies afterCall to the stored record; only an answer of Slack
// (or a post that may have landed) changes it.
func (s *Service) save(ctx context.Context, r *Record, o *outcome, now time.Time) (ok bool) {
	if o.Class == classCanceled || (o.Class == ClassUnreachable && !o.MaybeSent) {
		return true
	}
	pol := deliveryPolicy{GroupWindow: s.cfg.GroupWindow, RetryFor: s.cfg.RetryFor, Backoff: s.backoff}
	if _, err := s.outbox.Update(ctx, r.ID, func(x *Record) {
		var next *Record
		if next, o.effect = afterCall(x, r, o.callResult, now, pol); next != nil {
			*x = *next
		}
	}); err != nil {
		s.log.Error("recording a Slack result failed", "id", r.ID, "err", err)
		return false
	}
	return true
}

// report says what a Slack call came to: at most one log line, the
// metrics, the pause of the pass; it reports whether the pass stops.
func (s *Service) report(ctx context.Context, r *Record, o outcome, now time.Time) (stop bool) {
	res, method, err := o.callResult, o.method, o.err
	switch res.Class {
	case classCanceled:
		return true
	case ClassUnreachable:
		n, _ := s.outbox.Waiting(ctx)
		s.log.Warn(fmt.Sprintf("Slack unreachable, %d notifications waiting", n), "pause", s.pause.length().String(), "err", err)
		return true
	case ClassRateLimited:
		wait := cmpDuration(res.Wait, defaultRateWait)
		s.notBefore = now.Add(wait)
		s.log.Info("Slack rate limit: pausing delivery", "method", method, "retry_after", wait.String())
		return true
	case classOK:
		s.transient.Reset()
	}
	switch o.effect {
	case effectDelivered:
		s.m.delivered.WithLabelValues(string(r.Kind)).Inc()
	case effectUpdateRefused:
		s.log.Warn("Slack refused to update a notification's message; it keeps what it showed", "id", r.ID, "reason", res.Reason)
	case effectUpdateGaveUp:
		s.log.Warn("gave up updating a notification's message", "id", r.ID, "attempts", r.UpdateFailures+1,
			"retry_for", s.cfg.RetryFor.String(), "reason", res.Reason)
	case effectDead:
		s.m.dead.WithLabelValues(string(r.Kind)).Inc()
		if res.Class == ClassPermanent {
			s.log.Error("Slack refused a notification for good: it is dead (see GET /v1/notifications?state=dead; resend it with n8n-guard notifications resend ID)",
				"id", r.ID, "kind", r.Kind, "channel", r.Channel, "owner", r.Owner, "reason", res.Reason, "hint", hint(err))
		} else {
			s.log.Error("notification is dead: Slack kept failing for longer than notify.retry_for (see GET /v1/notifications?state=dead; resend it with n8n-guard notifications resend ID)",
				"id", r.ID, "kind", r.Kind, "attempts", r.Attempts+1, "retry_for", s.cfg.RetryFor.String(), "reason", res.Reason)
		}
	case effectRetry:
		// Slack answered with a fault: the pass stops and the next one
		// waits a little, growing to transientPauseMax while the faults go
		// on. The other notifications keep their turn, so the first call
		// that works after an outage is followed by the whole backlog.
		s.notBefore = now.Add(s.transient.NextBackOff())
		s.log.Debug("Slack call failed, will retry", "id", r.ID, "reason", res.Reason)
		return true
	}
	return false
}

// cmpDuration is d, or def when d is not positive.
func cmpDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// backoff is the wait before attempt n+1: exponential with jitter.
func (s *Service) backoff(attempt int) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     s.opts.BackoffInitial,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         s.opts.BackoffMax,
	}
	b.Reset()
	d := s.opts.BackoffInitial
	for i := 0; i < min(attempt, 64); i++ { // the cap is reached long before
		d = b.NextBackOff()
	}
	return d
}

// owner returns the mention of an owner and, for a person, the user ID
// (for a direct message when no channel is configured). An e-mail is
// resolved once with users.lookupByEmail and cached in the outbox.
func (s *Service) owner(ctx context.Context, owner string) (mention, userID string, c Class, wait time.Duration, err error) {
	switch {
	case owner == "":
		return "_no owner configured (set notify.default_owner)_", "", classOK, 0, nil
	case userIDRE.MatchString(owner):
		return "<@" + owner + ">", owner, classOK, 0, nil
	case groupIDRE.MatchString(owner):
		return "<!subteam^" + owner + ">", "", classOK, 0, nil
	}
	email := strings.ToLower(owner)
	s.usersMu.Lock()
	id, known := s.users[email]
	s.usersMu.Unlock()
	if !known {
		if cached, ok, err := s.outbox.SlackUser(ctx, email); err == nil && ok {
			id, known = cached, true
		}
	}
	if !known {
		var found bool
		c, wait, err = s.call(ctx, "users.lookupByEmail", func() error {
			var err error
			id, found, err = s.slack.UserByEmail(ctx, email)
			return err
		})
		switch {
		case c == classOK && found:
			if err := s.outbox.SetSlackUser(ctx, email, id); err != nil {
				s.log.Warn("caching a Slack user failed", "err", err)
			}
		case c == classOK:
			// Not cached durably: the person may join Slack later.
			id = ""
			s.log.Warn("an owner e-mail of the notify config is not a Slack user; messages go out without a mention",
				"reason", "users_not_found")
		default:
			return "", "", c, wait, err
		}
		s.usersMu.Lock()
		s.users[email] = id
		s.usersMu.Unlock()
	}
	if id == "" {
		return "_owner not found in Slack (check the notify config)_", "", classOK, 0, nil
	}
	return "<@" + id + ">", id, classOK, 0, nil
}
