package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/slack-go/slack"
	"github.com/sony/gobreaker/v2"
)

const (
	dueBatch   = 50
	maxPerPass = 1000
	// defaultRateWait applies when Slack says "rate limited" without a
	// Retry-After.
	defaultRateWait = 30 * time.Second
)

// deliver is one pass over the due notifications. It stops at the first
// sign that Slack is unreachable (the breaker then holds every call for
// SlackPause) or rate limited, and logs at most one line about it.
func (s *Service) deliver(ctx context.Context) {
	defer s.updateWaiting(ctx)
	if s.slack == nil || ctx.Err() != nil {
		return
	}
	now := s.now()
	if now.Before(s.notBefore) || s.breaker.State() == gobreaker.StateOpen {
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

// call runs one Slack call through the breaker and counts it.
func (s *Service) call(ctx context.Context, method string, fn func() error) (class, time.Duration, error) {
	_, err := s.breaker.Execute(func() (struct{}, error) { return struct{}{}, fn() })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return classUnreachable, 0, err
	}
	c, wait := classify(ctx, err)
	s.m.slackCalls.WithLabelValues(method, className[c]).Inc()
	return c, wait, err
}

var className = map[class]string{
	classOK: "ok", classTransient: "transient", classRateLimited: "rate_limited",
	classPermanent: "permanent", classUnreachable: "unreachable", classCanceled: "canceled",
}

// send makes the one Slack call r is due for and records the result. It
// reports whether the pass must stop.
func (s *Service) send(ctx context.Context, r *record) (stop bool) {
	update := r.Status == StatusDelivered && r.SlackTS != ""
	if r.Status == StatusDead || (r.Status == StatusDelivered && !update) {
		// Nothing to send; clear a stale schedule.
		_, err := s.outbox.Update(ctx, r.ID, func(c *record) { c.DueAt = time.Time{} })
		return err != nil
	}
	mention, userID, c, wait, err := s.owner(ctx, r.Owner)
	method := "users.lookupByEmail"
	var ch, ts string
	if c == classOK {
		msg := render(r, mention, s.cfg.GuardURL)
		switch {
		case update:
			method = "chat.update"
			ch, ts = r.SlackChannel, r.SlackTS
			c, wait, err = s.call(ctx, method, func() error {
				_, _, _, err := s.slack.UpdateMessageContext(ctx, ch, ts, msg.options()...)
				return err
			})
		default:
			method = "chat.postMessage"
			channel := r.Channel
			if channel == "" {
				channel = userID // a direct message from the app
			}
			if channel == "" {
				c, err = classPermanent, errors.New("no channel: set notify.default_channel or a channel on the owner rule")
				break
			}
			c, wait, err = s.call(ctx, method, func() error {
				var err error
				ch, ts, err = s.slack.PostMessageContext(ctx, channel, msg.options()...)
				return err
			})
		}
	}
	return s.settle(ctx, r, update, method, c, wait, err, ch, ts)
}

// settle records the result of a Slack call. Only an answer of Slack
// changes a notification: when Slack was not reached nothing is marked.
func (s *Service) settle(ctx context.Context, r *record, update bool, method string, c class, wait time.Duration, err error, ch, ts string) (stop bool) {
	now := s.now()
	shown := r.Count
	var save func(*record)
	switch c {
	case classCanceled:
		return true
	case classUnreachable:
		n, _ := s.outbox.Waiting(ctx)
		s.log.Warn(fmt.Sprintf("Slack unreachable, %d notifications waiting", n),
			"pause", s.cfg.SlackPause.String(), "err", err)
		return true
	case classRateLimited:
		if wait <= 0 {
			wait = defaultRateWait
		}
		s.notBefore = now.Add(wait)
		s.log.Info("Slack rate limit: pausing delivery", "method", method, "retry_after", wait.String())
		save = func(x *record) {
			x.DueAt = later(x.DueAt, now.Add(wait))
			x.LastFailure = fmt.Sprintf("%s: rate limited by Slack, retry after %s", method, wait)
		}
		stop = true
	case classOK:
		save = func(x *record) {
			if !update {
				x.Status, x.SlackChannel, x.SlackTS = StatusDelivered, ch, ts
				t := now
				x.DeliveredAt = &t
			}
			x.LastSentAt, x.ShownCount, x.UpdateFailures, x.LastFailure = now, shown, 0, ""
			x.DueAt = time.Time{}
			if x.Count > x.ShownCount { // intake raised the count during the call
				x.DueAt = now.Add(s.cfg.GroupWindow / 2)
			}
		}
	case classPermanent:
		reason := method + ": " + slackReason(err)
		if update {
			s.log.Warn("Slack refused to update a notification's count; the message keeps the old count",
				"id", r.ID, "reason", reason)
			save = func(x *record) { x.DueAt, x.LastFailure = time.Time{}, reason }
			break
		}
		s.log.Error("Slack refused a notification for good: it is dead (see GET /v1/notifications?status=dead)",
			"id", r.ID, "kind", r.Kind, "channel", r.Channel, "owner", r.Owner, "reason", reason, "hint", hint(err))
		save = func(x *record) { x.Status, x.DueAt, x.LastFailure = StatusDead, time.Time{}, reason }
		s.m.dead.WithLabelValues(string(r.Kind)).Inc()
	default: // transient
		reason := method + ": " + slackReason(err)
		attempts := r.Attempts + 1
		if update {
			attempts = r.UpdateFailures + 1
		}
		if attempts >= s.cfg.MaxAttempts {
			if update {
				s.log.Warn("gave up updating a notification's count", "id", r.ID, "attempts", attempts, "reason", reason)
				save = func(x *record) { x.UpdateFailures, x.DueAt, x.LastFailure = attempts, time.Time{}, reason }
				break
			}
			s.log.Error("notification is dead after too many failed attempts (see GET /v1/notifications?status=dead)",
				"id", r.ID, "kind", r.Kind, "attempts", attempts, "reason", reason)
			save = func(x *record) {
				x.Attempts, x.Status, x.DueAt, x.LastFailure = attempts, StatusDead, time.Time{}, reason
			}
			s.m.dead.WithLabelValues(string(r.Kind)).Inc()
			break
		}
		next := now.Add(s.backoff(attempts))
		s.log.Debug("Slack call failed, will retry", "id", r.ID, "attempt", attempts, "next", next, "reason", reason)
		save = func(x *record) {
			if update {
				x.UpdateFailures = attempts
			} else {
				x.Attempts = attempts
			}
			x.DueAt, x.LastFailure = next, reason
		}
	}
	if c == classOK && !update {
		s.m.delivered.WithLabelValues(string(r.Kind)).Inc()
	}
	if _, err := s.outbox.Update(ctx, r.ID, save); err != nil {
		s.log.Error("recording a Slack result failed", "id", r.ID, "err", err)
		return true
	}
	return stop
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
	for i := 0; i < attempt; i++ {
		d = b.NextBackOff()
	}
	return d
}

func slackReason(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	if err == nil {
		return "unknown"
	}
	return truncate(err.Error(), 300)
}

func hint(err error) string {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return ""
	}
	switch se.Err {
	case "channel_not_found":
		return "the channel ID in the notify config does not exist (use the channel ID C…, not its name)"
	case "not_in_channel":
		return "invite the n8n-guard app to the channel (/invite @app)"
	case "invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive":
		return "SLACK_BOT_TOKEN is not a valid bot token: replace it and restart"
	case "missing_scope":
		return "the app needs the chat:write (and users:read.email for e-mail owners) scopes"
	case "is_archived", "channel_is_archived":
		return "the channel is archived: pick another in the notify config"
	}
	return ""
}

// owner returns the mention of an owner and, for a person, the user ID
// (for a direct message when no channel is configured). An e-mail is
// resolved once with users.lookupByEmail and cached in the outbox.
func (s *Service) owner(ctx context.Context, owner string) (mention, userID string, c class, wait time.Duration, err error) {
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
		var u *slack.User
		c, wait, err = s.call(ctx, "users.lookupByEmail", func() error {
			var err error
			u, err = s.slack.GetUserByEmailContext(ctx, email)
			return err
		})
		var se slack.SlackErrorResponse
		switch {
		case c == classOK:
			id = u.ID
			if err := s.outbox.SetSlackUser(ctx, email, id); err != nil {
				s.log.Warn("caching a Slack user failed", "err", err)
			}
		case errors.As(err, &se) && (se.Err == "users_not_found" || se.Err == "user_not_found"):
			// Not cached durably: the person may join Slack later.
			s.log.Warn("an owner e-mail of the notify config is not a Slack user; messages go out without a mention",
				"reason", se.Err)
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
