package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/slack-go/slack"
)

const (
	dueBatch   = 50
	maxPerPass = 1000
	// defaultRateWait applies when Slack says "rate limited" without a
	// Retry-After.
	defaultRateWait = 30 * time.Second
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

// errPaused: the call was not made, Slack is paused.
var errPaused = errors.New("Slack is paused after it was unreachable")

// call runs one Slack call through the pause and counts it.
func (s *Service) call(ctx context.Context, method string, fn func() error) (class, time.Duration, error) {
	if !s.pause.allow(s.now()) {
		return classUnreachable, 0, errPaused
	}
	err := fn()
	c, wait := classify(ctx, err)
	switch c {
	case classCanceled:
	case classUnreachable:
		s.pause.unreachable(s.now())
	default:
		if s.pause.answered() {
			s.log.Info("Slack reachable again, delivering waiting notifications")
		}
	}
	s.m.slackCalls.WithLabelValues(method, className[c]).Inc()
	return c, wait, err
}

var className = map[class]string{
	classOK: "ok", classTransient: "transient", classRateLimited: "rate_limited",
	classPermanent: "permanent", classUnreachable: "unreachable", classCanceled: "canceled",
}

// metadataType marks our messages; the payload carries the notification
// ID, so a post that timed out can be found in the channel (see landed).
const metadataType = "n8n_guard_notification"

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
		r.canRetry = s.n8n != nil
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
			channel := r.Channel
			if channel == "" {
				channel = userID // a direct message from the app
			}
			if channel == "" {
				method, c, err = "chat.postMessage", classPermanent, errors.New("no channel: set notify.default_channel or a channel on the owner rule")
				break
			}
			if r.PostUncertain {
				method = "conversations.history"
				var found bool
				if found, ts, c, wait, err = s.landed(ctx, channel, r); c == classOK && found {
					ch = channel
					break
				}
				if c != classOK && c != classPermanent {
					break
				}
				// Not there (or the history cannot be read): post.
			}
			method = "chat.postMessage"
			opts := append(msg.options(), slack.MsgOptionMetadata(slack.SlackMetadata{
				EventType: metadataType, EventPayload: map[string]any{"notification_id": r.ID}}))
			c, wait, err = s.call(ctx, method, func() error {
				var err error
				ch, ts, err = s.slack.PostMessageContext(ctx, channel, opts...)
				return err
			})
		}
	}
	return s.settle(ctx, r, update, method, c, wait, err, ch, ts)
}

// landed looks for r's message in the channel's recent history, by the
// notification ID in its metadata: an earlier post of it got no answer.
func (s *Service) landed(ctx context.Context, channel string, r *record) (found bool, ts string, c class, wait time.Duration, err error) {
	// From just before the first post that got no answer: in a busy
	// channel, the newest 200 messages since then.
	oldest := r.UncertainAt.Add(-time.Minute)
	c, wait, err = s.call(ctx, "conversations.history", func() error {
		h, err := s.slack.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
			ChannelID: channel, Oldest: fmt.Sprintf("%d.000000", oldest.Unix()), Limit: 200, IncludeAllMetadata: true,
		})
		if err != nil {
			return err
		}
		for _, m := range h.Messages {
			if m.Metadata.EventType == metadataType && m.Metadata.EventPayload["notification_id"] == r.ID {
				found, ts = true, m.Timestamp
				return nil
			}
		}
		return nil
	})
	if c == classPermanent {
		s.log.Warn("cannot read the channel to check whether a timed-out post landed; posting again",
			"id", r.ID, "channel", channel, "reason", slackReason(err), "hint", "give the app the channels:history scope")
	}
	return found, ts, c, wait, err
}

// settle records the result of a Slack call. Only an answer of Slack
// changes a notification: when Slack was not reached nothing is marked
// but that a post may have landed.
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
			"pause", s.pause.length().String(), "err", err)
		if update || method != "chat.postMessage" || !maybeSent(err) {
			return true
		}
		save = func(x *record) {
			if !x.PostUncertain { // the first such post is the one to look for
				x.PostUncertain, x.UncertainAt = true, now
			}
		}
		stop = true
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
		s.transient.Reset()
		save = func(x *record) {
			if !update {
				x.Status, x.SlackChannel, x.SlackTS = StatusDelivered, ch, ts
				t := now
				x.DeliveredAt = &t
				x.PostUncertain, x.UncertainAt = false, time.Time{}
			}
			x.LastSentAt, x.ShownCount, x.UpdateFailures, x.LastFailure = now, shown, 0, ""
			x.DueAt = time.Time{}
			if x.Count > x.ShownCount { // intake raised the count during the call
				x.DueAt = now.Add(s.cfg.GroupWindow / 2)
			}
			if x.Decision != r.Decision { // a click during the call
				x.DueAt = now
			}
		}
	case classPermanent:
		reason := method + ": " + slackReason(err)
		if update {
			s.log.Warn("Slack refused to update a notification's message; it keeps what it showed",
				"id", r.ID, "reason", reason)
			save = func(x *record) { x.DueAt, x.LastFailure = time.Time{}, reason }
			break
		}
		s.log.Error("Slack refused a notification for good: it is dead (see GET /v1/notifications?state=dead; resend it with n8n-guard notifications resend ID)",
			"id", r.ID, "kind", r.Kind, "channel", r.Channel, "owner", r.Owner, "reason", reason, "hint", hint(err))
		save = func(x *record) { x.Status, x.DueAt, x.LastFailure = StatusDead, time.Time{}, reason }
		s.m.dead.WithLabelValues(string(r.Kind)).Inc()
	default: // transient
		reason := method + ": " + slackReason(err)
		attempts := r.Attempts + 1
		since := r.CreatedAt
		if r.ResentAt != nil {
			since = *r.ResentAt
		}
		if update {
			attempts, since = r.UpdateFailures+1, r.LastSentAt
		}
		if now.Sub(since) >= s.cfg.RetryFor {
			if update {
				s.log.Warn("gave up updating a notification's message", "id", r.ID, "attempts", attempts,
					"retry_for", s.cfg.RetryFor.String(), "reason", reason)
				save = func(x *record) { x.UpdateFailures, x.DueAt, x.LastFailure = attempts, time.Time{}, reason }
				break
			}
			s.log.Error("notification is dead: Slack kept failing for longer than notify.retry_for (see GET /v1/notifications?state=dead; resend it with n8n-guard notifications resend ID)",
				"id", r.ID, "kind", r.Kind, "attempts", attempts, "retry_for", s.cfg.RetryFor.String(), "reason", reason)
			save = func(x *record) {
				x.Attempts, x.Status, x.DueAt, x.LastFailure = attempts, StatusDead, time.Time{}, reason
			}
			s.m.dead.WithLabelValues(string(r.Kind)).Inc()
			break
		}
		next := now.Add(s.backoff(attempts))
		// Slack answered with a fault: the pass stops and the next one
		// waits a little, growing to transientPauseMax while the faults go
		// on. The other notifications keep their turn, so the first call
		// that works after an outage is followed by the whole backlog.
		s.notBefore = now.Add(s.transient.NextBackOff())
		stop = true
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
	for i := 0; i < min(attempt, 64); i++ { // the cap is reached long before
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
