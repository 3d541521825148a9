package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/slack-go/slack"
)

// class is what a Slack call's error means for the notification.
type class int

const (
	classOK          class = iota
	classTransient         // Slack answered with a passing fault: back off, count the attempt
	classRateLimited       // 429: wait Retry-After, not counted
	classPermanent         // Slack refused for good: dead at once
	classUnreachable       // never got an answer (DNS, refused, TLS, timeout): trip the breaker
	classCanceled          // our own shutdown
)

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

// classify maps an error of slack-go (or of the HTTP client under it).
func classify(ctx context.Context, err error) (class, time.Duration) {
	if err == nil {
		return classOK, 0
	}
	if ctx.Err() != nil {
		return classCanceled, 0
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return classRateLimited, rl.RetryAfter
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch {
		case permanentSlackErrors[se.Err]:
			return classPermanent, 0
		case se.Err == "ratelimited" || se.Err == "rate_limited":
			return classRateLimited, 0
		}
		return classTransient, 0
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		if sc.Code == http.StatusTooManyRequests {
			return classRateLimited, 0
		}
		return classTransient, 0
	}
	if unreachable(err) {
		return classUnreachable, 0
	}
	return classTransient, 0
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
	case errors.Is(err, errPaused), errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &dnsErr), errors.As(err, &certErr):
		return false
	}
	return true
}

// slackAPI is the part of slack-go's client the service uses.
type slackAPI interface {
	PostMessageContext(ctx context.Context, channelID string, options ...slack.MsgOption) (string, string, error)
	UpdateMessageContext(ctx context.Context, channelID, timestamp string, options ...slack.MsgOption) (string, string, string, error)
	GetUserByEmailContext(ctx context.Context, email string) (*slack.User, error)
	GetConversationHistoryContext(ctx context.Context, params *slack.GetConversationHistoryParameters) (*slack.GetConversationHistoryResponse, error)
	PostEphemeralContext(ctx context.Context, channelID, userID string, options ...slack.MsgOption) (string, error)
	GetUserGroupMembersContext(ctx context.Context, userGroup string, options ...slack.GetUserGroupMembersOption) ([]string, error)
}

// newSlackClient builds slack-go's client with our timeouts: connect
// (dial + TLS) and total per request. The token also goes in the
// Authorization header, the form Slack recommends.
func newSlackClient(o Options) *slack.Client {
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
	rt := transportOf(hc)
	if o.wrap != nil {
		rt = o.wrap(rt)
	}
	hc = &http.Client{Timeout: hc.Timeout, Transport: bearer{token: o.Token, next: rt}}
	opts := []slack.Option{slack.OptionHTTPClient(hc)}
	if o.AppToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(o.AppToken))
	}
	if o.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(o.APIURL))
	}
	return slack.New(o.Token, opts...)
}

func transportOf(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
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
