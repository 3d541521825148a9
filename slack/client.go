package slack

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/slack-go/slack"

	"github.com/n8n-guard/n8n-guard/notify"
)

// Options configure the Web API client.
type Options struct {
	// Token is the bot token (SLACK_BOT_TOKEN).
	Token string
	// APIURL overrides Slack's Web API base URL, in slack-go's form with a
	// trailing slash (SLACK_API_URL), e.g. http://127.0.0.1:8080/api/.
	APIURL string
	// HTTPClient replaces the client built from the timeouts below.
	HTTPClient *http.Client
	// ConnectTimeout (dial + TLS, default 10s) and RequestTimeout (whole
	// request, default 30s) of each Slack call.
	ConnectTimeout time.Duration
	RequestTimeout time.Duration
	// Wrap, when set, wraps the transport (tests count the requests that
	// leave the process).
	Wrap func(http.RoundTripper) http.RoundTripper
}

// withDefaults fills in the timeouts' defaults, as their comments say: the
// one place they are applied. A zero or negative timeout is the default.
func (o Options) withDefaults() Options {
	o.ConnectTimeout = cmp.Or(max(o.ConnectTimeout, 0), 10*time.Second)
	o.RequestTimeout = cmp.Or(max(o.RequestTimeout, 0), 30*time.Second)
	return o
}

// Client speaks Slack's Web API for notify (it implements notify.Slack).
type Client struct {
	api *slack.Client
}

var _ notify.Slack = (*Client)(nil)

// New builds the client.
func New(o Options) *Client { return &Client{api: newAPI(o, "")} }

// newAPI builds slack-go's client with our timeouts: connect (dial + TLS)
// and total per request. The token also goes in the Authorization header,
// the form Slack recommends.
func newAPI(o Options, appToken string) *slack.Client {
	o = o.withDefaults()
	hc := o.HTTPClient
	if hc == nil {
		dialer := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
		hc = &http.Client{
			Timeout: o.RequestTimeout,
			Transport: &http.Transport{
				Proxy:                 http.ProxyFromEnvironment,
				DialContext:           dialer.DialContext,
				TLSHandshakeTimeout:   o.ConnectTimeout,
				ResponseHeaderTimeout: o.RequestTimeout,
				MaxIdleConnsPerHost:   4,
				IdleConnTimeout:       90 * time.Second,
			},
		}
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if o.Wrap != nil {
		rt = o.Wrap(rt)
	}
	token := o.Token
	if appToken != "" {
		token = appToken // apps.connections.open takes the app-level token
	}
	hc = &http.Client{Timeout: hc.Timeout, Transport: bearer{token: token, next: rt}}
	opts := []slack.Option{slack.OptionHTTPClient(hc)}
	if appToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(appToken))
	}
	if o.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(o.APIURL))
	}
	return slack.New(token, opts...)
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// metadataType marks our messages; the payload carries the notification
// ID, so a post that timed out can be found in the channel (see Find).
const metadataType = "n8n_guard_notification"

// Post implements notify.Slack.
func (c *Client) Post(ctx context.Context, channel string, m notify.Message) (string, string, error) {
	opts := append(render(m).options(), slack.MsgOptionMetadata(slack.SlackMetadata{
		EventType: metadataType, EventPayload: map[string]any{"notification_id": m.Record.ID}}))
	ch, ts, err := c.api.PostMessageContext(ctx, channel, opts...)
	return ch, ts, callError(err)
}

// Update implements notify.Slack.
func (c *Client) Update(ctx context.Context, channel, ts string, m notify.Message) error {
	_, _, _, err := c.api.UpdateMessageContext(ctx, channel, ts, render(m).options()...)
	return callError(err)
}

// Find implements notify.Slack: in a busy channel, the newest 200
// messages since since, by the notification ID in their metadata.
func (c *Client) Find(ctx context.Context, channel, id string, since time.Time) (string, bool, error) {
	h, err := c.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
		ChannelID: channel, Oldest: fmt.Sprintf("%d.000000", since.Unix()), Limit: 200, IncludeAllMetadata: true,
	})
	if err != nil {
		return "", false, callError(err)
	}
	for _, m := range h.Messages {
		if m.Metadata.EventType == metadataType && m.Metadata.EventPayload["notification_id"] == id {
			return m.Timestamp, true, nil
		}
	}
	return "", false, nil
}

// Ephemeral implements notify.Slack.
func (c *Client) Ephemeral(ctx context.Context, channel, user, text string) error {
	_, err := c.api.PostEphemeralContext(ctx, channel, user, slack.MsgOptionText(text, false))
	return callError(err)
}

// ReasonCallback is the callback ID of the form that asks for a
// rejection's reason (notify.ActionRejectReason).
const ReasonCallback = "guard_reject_reason"

// AskReason implements notify.Slack: a modal with one required text field.
func (c *Client) AskReason(ctx context.Context, triggerID, meta, title string) error {
	input := slack.NewPlainTextInputBlockElement(plain("Why is it rejected? (kept in the key's history)"), "reason")
	input.Multiline = true
	view := slack.ModalViewRequest{
		Type: slack.VTModal, CallbackID: ReasonCallback, PrivateMetadata: meta,
		Title: plain(notify.Truncate(title, 24)), Submit: plain("Reject"), Close: plain("Cancel"),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock("reason", plain("Reason"), nil, input)}},
	}
	_, err := c.api.OpenViewContext(ctx, triggerID, view)
	return callError(err)
}

// UserByEmail implements notify.Slack.
func (c *Client) UserByEmail(ctx context.Context, email string) (string, bool, error) {
	u, err := c.api.GetUserByEmailContext(ctx, email)
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && (se.Err == "users_not_found" || se.Err == "user_not_found") {
		return "", false, nil
	}
	if err != nil {
		return "", false, callError(err)
	}
	return u.ID, true, nil
}

// GroupMembers implements notify.Slack.
func (c *Client) GroupMembers(ctx context.Context, group string) ([]string, error) {
	m, err := c.api.GetUserGroupMembersContext(ctx, group)
	return m, callError(err)
}

// Slack errors that no retry can fix.
var permanentSlackErrors = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true, "channel_is_archived": true,
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true,
	"token_expired": true, "no_permission": true, "missing_scope": true, "org_login_required": true,
	"ekm_access_denied": true, "invalid_blocks": true, "invalid_blocks_format": true,
	"msg_too_long": true, "restricted_action": true, "team_access_not_granted": true,
	"invalid_arguments": true, "no_text": true, "cannot_dm_bot": true, "user_not_found": true,
	"users_not_found": true, "message_not_found": true, "cant_update_message": true,
	"edit_window_closed": true, "not_allowed_token_type": true,
}

// callError maps an error of slack-go (or of the HTTP client under it) to
// what it means for a notification.
func callError(err error) error {
	if err == nil {
		return nil
	}
	e := &notify.CallError{Class: notify.ClassTransient, Reason: err.Error(), Err: err}
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	switch {
	case errors.As(err, &rl):
		e.Class, e.RetryAfter = notify.ClassRateLimited, rl.RetryAfter
	case errors.As(err, &se):
		e.Reason, e.Hint = se.Err, hint(se.Err)
		switch {
		case permanentSlackErrors[se.Err]:
			e.Class = notify.ClassPermanent
		case se.Err == "ratelimited" || se.Err == "rate_limited":
			e.Class = notify.ClassRateLimited
		}
	case errors.As(err, &sc):
		if sc.Code == http.StatusTooManyRequests {
			e.Class = notify.ClassRateLimited
		}
	case unreachable(err):
		e.Class, e.MaybeSent = notify.ClassUnreachable, maybeSent(err)
	}
	return e
}

// unreachable reports errors where no answer of Slack arrived.
func unreachable(err error) bool {
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		urlErr  *url.Error
		certErr *tls.CertificateVerificationError
		unkAuth x509.UnknownAuthorityError
		hostErr x509.HostnameError
		recErr  tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &opErr), errors.As(err, &certErr),
		errors.As(err, &unkAuth), errors.As(err, &hostErr), errors.As(err, &recErr):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, http.ErrHandlerTimeout):
		return true
	case errors.As(err, &urlErr):
		// client.Do failed: no HTTP answer arrived.
		return true
	}
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// maybeSent reports an error after which a request may have reached
// Slack and been carried out: no answer came back (a timeout, a dropped
// connection), as opposed to a connection never made.
func maybeSent(err error) bool {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &dnsErr), errors.As(err, &certErr):
		return false
	}
	return true
}

func hint(code string) string {
	switch code {
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
