package notify

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/slack-go/slack"
)

// replayWindow is Slack's: a request older than this is refused, and a
// signature seen within it is a replay.
const replayWindow = 5 * time.Minute

// Interaction takes one interactivity request as Slack sends it over HTTP
// (POST, form field payload=…): it checks the signature with the signing
// secret (HMAC-SHA256 over "v0:timestamp:body", constant-time compare,
// five-minute window, each signature once) and hands the clicks to the
// worker. It returns at once, well inside Slack's three seconds; the
// decisions are answered in the message itself.
//
// Unsigned, wrongly signed, replayed or stale requests are unauthorized
// errors and change nothing.
func (s *Service) Interaction(ctx context.Context, header http.Header, body []byte) error {
	if s.cfg.SigningSecret == "" {
		return errs.Errorf(problem.Unauthorized, "Slack interactivity over HTTP is not configured (SLACK_SIGNING_SECRET is empty)")
	}
	v, err := slack.NewSecretsVerifier(header, s.cfg.SigningSecret)
	if err != nil {
		s.m.refused.Inc()
		if errors.Is(err, slack.ErrExpiredTimestamp) {
			return errs.Errorf(problem.Unauthorized, "the request's X-Slack-Request-Timestamp is more than 5 minutes away")
		}
		return errs.Errorf(problem.Unauthorized, "the request is not signed by Slack (X-Slack-Signature, X-Slack-Request-Timestamp)")
	}
	_, _ = v.Write(body)
	if err := v.Ensure(); err != nil {
		s.m.refused.Inc()
		return errs.Errorf(problem.Unauthorized, "the X-Slack-Signature does not match (check SLACK_SIGNING_SECRET)")
	}
	if !s.replays.first(header.Get("X-Slack-Signature"), s.now()) {
		s.m.refused.Inc()
		return errs.Errorf(problem.Unauthorized, "this signed request was already received (replay)")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		return errs.Errorf(errs.InvalidRequest, "the body has no payload field")
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		return errs.Errorf(errs.InvalidRequest, "the payload is not Slack's interaction JSON")
	}
	s.dispatch(cb)
	return nil
}

// dispatch hands the clicks of a block_actions payload to a goroutine
// that outlives the request (Close waits for it); other payload types are
// not ours and are ignored.
func (s *Service) dispatch(cb slack.InteractionCallback) {
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		s.log.Warn("a Slack interaction carried no button of n8n-guard; ignored", "type", cb.Type)
		return
	}
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	for _, a := range cb.ActionCallback.BlockActions {
		c := Click{Action: a.ActionID, NotificationID: a.Value, UserID: cb.User.ID,
			UserName: cmpOr(cb.User.Name, cb.User.Username), Channel: channel}
		if c.Action == "open_execution" {
			continue // a link button: Slack opens the URL
		}
		s.clicks.Add(1)
		go func() {
			defer s.clicks.Done()
			defer func() {
				// A click must not take the guard (and its API) down.
				if p := recover(); p != nil {
					s.log.Error("panic while carrying out a Slack click", "panic", p, "action", c.Action, "id", c.NotificationID,
						"stack", string(debug.Stack()))
				}
			}()
			// Bounded by the Slack calls and, for a retry, by n8n's answer.
			ctx, cancel := context.WithTimeout(s.life, 3*s.opts.RequestTimeout+n8nRetryTimeout)
			defer cancel()
			s.act(ctx, c)
		}()
	}
}

// replayGuard remembers the signatures of the last replayWindow. It is a
// guard for this process only; the decisions themselves are idempotent
// (a second click on a decided message changes nothing).
type replayGuard struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]time.Time
}

func (g *replayGuard) first(sig string, now time.Time) bool {
	k := sha256.Sum256([]byte(sig))
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[[sha256.Size]byte]time.Time{}
	}
	for s, at := range g.seen {
		if now.Sub(at) > 2*replayWindow {
			delete(g.seen, s)
		}
	}
	if _, ok := g.seen[k]; ok {
		return false
	}
	g.seen[k] = now
	return true
}
