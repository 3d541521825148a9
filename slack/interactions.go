package slack

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/slack-go/slack"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/decision"
)

// Clicks is the part of decision.Decider that takes the clicks this
// package checks and decodes.
type Clicks interface {
	// Dispatch carries out clicks; it returns at once.
	Dispatch(clicks ...decision.Click)
	// FirstUse records a request's identity (durably, for Slack's
	// window) and reports whether it is the first time.
	FirstUse(ctx context.Context, mark string) (bool, error)
	// Refused counts a refused request.
	Refused()
}

// Interactions takes Slack's interactivity requests over HTTP (the app's
// Request URL, POST /slack/interactions).
type Interactions struct {
	secret string
	clicks Clicks
	log    *slog.Logger
}

// NewInteractions checks requests against the app's signing secret
// (SLACK_SIGNING_SECRET; empty: every request is refused).
func NewInteractions(secret string, clicks Clicks, log *slog.Logger) *Interactions {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Interactions{secret: secret, clicks: clicks, log: log.With("component", "notify")}
}

// Interaction takes one interactivity request as Slack sends it over HTTP
// (POST, form field payload=…): it checks the signature with the signing
// secret (HMAC-SHA256 over "v0:timestamp:body", constant-time compare,
// five-minute window, each signature once, across restarts and replicas)
// and hands the clicks on (notify/decision). It returns at once, well inside Slack's
// three seconds; the decisions are answered in the message itself.
//
// Unsigned, wrongly signed, replayed or stale requests are unauthorized
// errors and change nothing.
func (in *Interactions) Interaction(ctx context.Context, header http.Header, body []byte) error {
	if in.secret == "" {
		return errs.Errorf(errs.Unauthorized, "Slack interactivity over HTTP is not configured (SLACK_SIGNING_SECRET is empty)")
	}
	v, err := slack.NewSecretsVerifier(header, in.secret)
	if err != nil {
		in.clicks.Refused()
		if errors.Is(err, slack.ErrExpiredTimestamp) {
			return errs.Errorf(errs.Unauthorized, "the request's X-Slack-Request-Timestamp is more than 5 minutes away")
		}
		return errs.Errorf(errs.Unauthorized, "the request is not signed by Slack (X-Slack-Signature, X-Slack-Request-Timestamp)")
	}
	_, _ = v.Write(body)
	if err := v.Ensure(); err != nil {
		in.clicks.Refused()
		return errs.Errorf(errs.Unauthorized, "the X-Slack-Signature does not match (check SLACK_SIGNING_SECRET)")
	}
	first, err := in.clicks.FirstUse(ctx, signatureMark(header.Get("X-Slack-Signature")))
	if err != nil {
		return err // the outbox is not available: Slack retries
	}
	if !first {
		in.clicks.Refused()
		return errs.Errorf(errs.Unauthorized, "this signed request was already received (replay)")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		return errs.Errorf(errs.InvalidRequest, "the body has no payload field")
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		return errs.Errorf(errs.InvalidRequest, "the payload is not Slack's interaction JSON")
	}
	in.clicks.Dispatch(clicksOf(cb, in.log)...)
	return nil
}

// signatureMark is the identity of a signed request: the signature's
// bytes, not its text (the verifier accepts the hex in either case, so
// "v0=AB…" and "v0=ab…" are one request).
func signatureMark(sig string) string {
	raw, err := hex.DecodeString(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(sig)), "v0="))
	if err != nil {
		return "slack-sig:" + strings.ToLower(sig)
	}
	return "slack-sig:" + hex.EncodeToString(raw)
}

// clicksOf reads the clicks of a block_actions payload; other payload
// types are not ours and are ignored.
func clicksOf(cb slack.InteractionCallback, log *slog.Logger) []decision.Click {
	name := cb.User.Name
	if strings.TrimSpace(name) == "" {
		name = cb.User.Username
	}
	if cb.Type == slack.InteractionTypeViewSubmission && cb.View.CallbackID == ReasonCallback {
		var form decision.ReasonForm
		_ = json.Unmarshal([]byte(cb.View.PrivateMetadata), &form)
		note := ""
		if cb.View.State != nil {
			note = cb.View.State.Values["reason"]["reason"].Value
		}
		return []decision.Click{{Action: notify.ActionRejectReason, Value: form.Value, UserID: cb.User.ID, UserName: name, Channel: form.Channel, Note: note}}
	}
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		log.Warn("a Slack interaction carried no button of n8n-guard; ignored", "type", cb.Type)
		return nil
	}
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	var out []decision.Click
	for _, a := range cb.ActionCallback.BlockActions {
		if a.ActionID == "open_execution" || strings.HasPrefix(a.ActionID, "open_console") {
			continue // a link button: Slack opens the URL
		}
		out = append(out, decision.Click{Action: a.ActionID, Value: a.Value, UserID: cb.User.ID, UserName: name, Channel: channel, TriggerID: cb.TriggerID})
	}
	return out
}
