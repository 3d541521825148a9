// Package openid speaks OpenID Connect to one identity provider (Google,
// Microsoft Entra ID, Okta, Keycloak, Slack's "Sign in with Slack", any
// provider with discovery): the authorization code flow with PKCE, state
// and nonce, and the ID token's verification, with coreos/go-oidc and
// golang.org/x/oauth2. It says who a person is (their name and groups);
// what they may do is access's rules, and the session is the console's.
//
// What it must never do: accept an ID token that is not signed by the
// provider's keys, not for this client, expired, or without the nonce the
// sign-in started with; name a person by an e-mail address the provider
// did not say it verified (unless the operator said the provider never
// does); log the client secret or a token.
package openid

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
)

// Config is one provider's registration.
type Config struct {
	// Issuer is the provider's issuer URL; discovery reads
	// <Issuer>/.well-known/openid-configuration, which must name the same.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is the console's callback as registered with the
	// provider: https://<guard>/ui/signin/oidc/callback.
	RedirectURL string
	// Scopes asked for besides openid (default: email, profile).
	Scopes []string
	// NameClaim names the person in histories and rules (default email).
	NameClaim string
	// GroupsClaim lists the person's groups (default groups); a token
	// without it has no groups.
	GroupsClaim string
	// EmailVerifiedOptional: the provider never sends email_verified
	// (some Microsoft Entra ID setups), so an ID token without it is
	// accepted when NameClaim is email. Off, such a token is refused: an
	// address nobody verified would sign in as whoever owns it. A token
	// that says false is refused either way.
	EmailVerifiedOptional bool
	// HTTPClient talks to the provider (default: 10 s timeout).
	HTTPClient *http.Client
	// Clock is the verifier's clock (tests); nil: time.Now.
	Clock func() time.Time
}

// CallbackPath is where the provider sends the person back, under the
// console's prefix.
const CallbackPath = "/signin/oidc/callback"

// Check refuses a configuration that cannot work, before anything runs.
func (c Config) Check() error {
	u, err := url.Parse(c.Issuer)
	switch {
	case c.Issuer == "" || err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("issuer: %q is not an https URL (e.g. https://accounts.google.com)", c.Issuer)
	case c.ClientID == "":
		return errors.New("client_id: required (the client or application id the provider gave)")
	case c.ClientSecret == "":
		return errors.New("client secret: required (client_secret_env or client_secret_file)")
	}
	r, err := url.Parse(c.RedirectURL)
	if c.RedirectURL == "" || err != nil || r.Host == "" || !strings.HasSuffix(r.Path, "/ui"+CallbackPath) {
		return fmt.Errorf("redirect_url: %q must be the console's callback as registered with the provider, https://<guard>/ui%s", c.RedirectURL, CallbackPath)
	}
	return nil
}

// Provider signs people in with one identity provider. Discovery runs at
// the first sign-in, and again after a failed one, so the guard starts
// (and serves n8n) while the provider is unreachable.
type Provider struct {
	cfg    Config
	client *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
}

// New checks cfg; it does not reach the provider.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.NameClaim == "" {
		cfg.NameClaim = "email"
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"email", "profile"}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Provider{cfg: cfg, client: client}, nil
}

// Issuer is the configured issuer URL (shown on the sign-in page).
func (p *Provider) Issuer() string { return p.cfg.Issuer }

func (p *Provider) discover(ctx context.Context) (*oidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.provider != nil {
		return p.provider, nil
	}
	op, err := oidc.NewProvider(oidc.ClientContext(ctx, p.client), p.cfg.Issuer)
	if err != nil {
		var mismatch *oidc.IssuerMismatchError
		if errors.As(err, &mismatch) {
			return nil, errs.Errorf(errs.StoreUnavailable, "the identity provider's discovery document names issuer %q, but the configuration says %q: correct console.oidc.issuer", mismatch.Discovered, mismatch.Provided)
		}
		return nil, errs.Errorf(errs.StoreUnavailable, "the identity provider at %s cannot be reached or its discovery document is not valid (%v); try again, or use the shared token sign-in", p.cfg.Issuer, err)
	}
	p.provider = op
	return op, nil
}

func (p *Provider) oauth(op *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     p.cfg.ClientID,
		ClientSecret: p.cfg.ClientSecret,
		RedirectURL:  p.cfg.RedirectURL,
		Endpoint:     endpoint(op),
		Scopes:       append([]string{oidc.ScopeOpenID}, p.cfg.Scopes...),
	}
}

// endpoint fixes how the client secret is sent, from discovery: left to
// guess, oauth2 would send the code a second time after any refusal, and
// a provider's "PKCE verification failed" would come back as "code
// already used". client_secret_basic is the default the specification
// gives when discovery names none.
func endpoint(op *oidc.Provider) oauth2.Endpoint {
	e := op.Endpoint()
	var d struct {
		Methods []string `json:"token_endpoint_auth_methods_supported"`
	}
	e.AuthStyle = oauth2.AuthStyleInHeader
	if op.Claims(&d) == nil && len(d.Methods) > 0 && !slices.Contains(d.Methods, "client_secret_basic") && slices.Contains(d.Methods, "client_secret_post") {
		e.AuthStyle = oauth2.AuthStyleInParams
	}
	return e
}

// Flow is what a sign-in keeps (sealed, in the browser) between leaving
// for the provider and coming back: the state, nonce and PKCE verifier.
type Flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
}

// Start returns the provider's authorization URL for a new flow, and the
// flow to keep until the callback.
func (p *Provider) Start(ctx context.Context) (string, Flow, error) {
	op, err := p.discover(ctx)
	if err != nil {
		return "", Flow{}, err
	}
	f := Flow{State: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier()}
	u := p.oauth(op).AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	return u, f, nil
}

// Identity is who the provider vouched for.
type Identity struct {
	Name    string   // the NameClaim's value
	Groups  []string // the GroupsClaim's values
	Subject string   // the provider's id of the person
}

// refused is a sign-in the provider or its token did not allow.
func refused(format string, args ...any) error {
	return errs.Errorf(problem.Unauthorized, format, args...)
}

// Finish completes the flow the provider sent the browser back to (its
// query): the state must be the flow's, the code is exchanged with the
// PKCE verifier, and the ID token must be signed by the provider, for this
// client, unexpired and carry the flow's nonce.
func (p *Provider) Finish(ctx context.Context, f Flow, q url.Values) (Identity, error) {
	if e := q.Get("error"); e != "" {
		return Identity{}, refused("the identity provider refused the sign-in: %s %s", e, q.Get("error_description"))
	}
	if f.State == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		return Identity{}, refused("this sign-in was not started in this browser, or it took more than 10 minutes: start it again")
	}
	op, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = oidc.ClientContext(ctx, p.client)
	tok, err := p.oauth(op).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return Identity{}, refused("the identity provider did not accept the sign-in code (%s %s): check client_id, the client secret and redirect_url", re.ErrorCode, re.ErrorDescription)
		}
		return Identity{}, errs.Errorf(errs.StoreUnavailable, "the identity provider's token endpoint cannot be reached: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, refused("the identity provider sent no ID token: the scope openid is required")
	}
	idt, err := op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID, Now: p.cfg.Clock}).Verify(ctx, raw)
	if err != nil {
		return Identity{}, refused("%s", verifyProblem(err, p.cfg))
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return Identity{}, refused("the ID token does not carry this sign-in's nonce (a replayed or foreign token): start the sign-in again")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, refused("the ID token's claims cannot be read: %v", err)
	}
	name, _ := claims[p.cfg.NameClaim].(string)
	if strings.TrimSpace(name) == "" {
		return Identity{}, refused("the ID token has no %q claim to name the person by: set console.oidc.name_claim, or ask for its scope", p.cfg.NameClaim)
	}
	if p.cfg.NameClaim == "email" {
		switch verified, said := emailVerified(claims); {
		case said && !verified:
			return Identity{}, refused("the identity provider has not verified the email %s", name)
		case !said && !p.cfg.EmailVerifiedOptional:
			return Identity{}, refused("the ID token does not say that the identity provider verified the email %s (no email_verified claim): "+
				"an unverified address would sign in as whoever owns it; if this provider never sends the claim, set console.oidc.email_verified_optional: true", name)
		}
	}
	return Identity{Name: strings.TrimSpace(name), Groups: stringsOf(claims[p.cfg.GroupsClaim]), Subject: idt.Subject}, nil
}

// emailVerified reads the email_verified claim: a boolean, or the string
// "true" or "false" some providers send; said is false when it is absent.
func emailVerified(claims map[string]any) (verified, said bool) {
	switch v := claims["email_verified"].(type) {
	case bool:
		return v, true
	case string:
		return strings.EqualFold(v, "true"), true
	}
	return false, false
}

// verifyProblem says in words why go-oidc refused an ID token.
func verifyProblem(err error, cfg Config) string {
	var expired *oidc.TokenExpiredError
	msg := err.Error()
	switch {
	case errors.As(err, &expired):
		return fmt.Sprintf("the ID token expired at %s (is this server's clock right?): sign in again", expired.Expiry.UTC().Format(time.RFC3339))
	case strings.Contains(msg, "expected audience"):
		return fmt.Sprintf("the ID token is for another application, not client_id %q (%s)", cfg.ClientID, msg)
	case strings.Contains(msg, "different provider"):
		return fmt.Sprintf("the ID token was issued by another issuer than %s (%s)", cfg.Issuer, msg)
	case strings.Contains(msg, "signature"):
		return "the ID token's signature does not match the identity provider's keys (" + msg + ")"
	}
	return "the ID token is not valid: " + msg
}

// stringsOf reads a claim that is a list of strings, or one string.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
