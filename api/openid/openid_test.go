package openid_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/api/openid"
	"github.com/n8n-guard/n8n-guard/api/openid/openidtest"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
)

const redirect = "https://guard.example.com/ui/signin/oidc/callback"

// authorize follows the provider's authorize endpoint as a browser would
// and returns the query it sends back to the callback.
func authorize(t *testing.T, u string) url.Values {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d %v", resp.StatusCode, err)
	}
	return back.Query()
}

// The code flow against the test provider: the authorization request
// carries PKCE (S256), state and nonce; the exchange proves the verifier;
// what the provider or the client gets wrong is refused in words.
// Mutation tried: Finish exchanging without oauth2.VerifierOption: the
// provider refuses the code ("PKCE verification failed").
func TestCodeFlow(t *testing.T) {
	is := openidtest.New("c1", "secret-1")
	defer is.Close()
	is.SignIn(openidtest.Person{Email: "ana@example.com", Groups: []string{"oncall", "staff"}})
	newProvider := func(secret string) *openid.Provider {
		p, err := openid.New(openid.Config{Issuer: is.URL, ClientID: "c1", ClientSecret: secret, RedirectURL: redirect})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	p := newProvider("secret-1")

	u, f, err := p.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.Parse(u)
	if v := q.Query(); v.Get("code_challenge_method") != "S256" || v.Get("state") != f.State || v.Get("nonce") != f.Nonce || v.Get("redirect_uri") != redirect ||
		!strings.Contains(v.Get("scope"), "openid") || strings.Contains(u, f.Verifier) {
		t.Fatalf("authorization URL %s (flow %+v)", u, f)
	}
	id, err := p.Finish(ctx, f, authorize(t, u))
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "ana@example.com" || strings.Join(id.Groups, ",") != "oncall,staff" || id.Subject == "" {
		t.Fatalf("identity %+v", id)
	}

	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"a code used twice", func() error {
			u, f, _ := p.Start(ctx)
			back := authorize(t, u)
			if _, err := p.Finish(ctx, f, back); err != nil {
				return err
			}
			_, err := p.Finish(ctx, f, back)
			return err
		}, "did not accept the sign-in code (invalid_grant"},
		{"another flow's verifier", func() error {
			u, f, _ := p.Start(ctx)
			back := authorize(t, u)
			f.Verifier = "x" + f.Verifier[1:]
			_, err := p.Finish(ctx, f, back)
			return err
		}, "PKCE verification failed"},
		{"a wrong client secret", func() error {
			other := newProvider("not-the-secret")
			u, f, _ := other.Start(ctx)
			_, err := other.Finish(ctx, f, authorize(t, u))
			return err
		}, "(invalid_client client authentication failed): check client_id, the client secret and redirect_url"},
		{"the person said no at the provider", func() error {
			_, f, _ := p.Start(ctx)
			_, err := p.Finish(ctx, f, url.Values{"state": {f.State}, "error": {"access_denied"}, "error_description": {"the user denied"}})
			return err
		}, "the identity provider refused the sign-in: access_denied the user denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if errs.CodeOf(err) != problem.Unauthorized || !strings.Contains(errs.MessageOf(err), tc.want) {
				t.Fatalf("%v, want unauthorized with %q", err, tc.want)
			}
		})
	}

	t.Run("an unreachable provider", func(t *testing.T) {
		p, _ := openid.New(openid.Config{Issuer: "http://127.0.0.1:1", ClientID: "c1", ClientSecret: "s", RedirectURL: redirect})
		_, _, err := p.Start(ctx)
		if errs.CodeOf(err) != errs.StoreUnavailable || !strings.Contains(errs.MessageOf(err), "cannot be reached") {
			t.Fatalf("%v", err)
		}
	})
}

// signIn runs one code flow of p against is, signing in person, and
// returns what Finish says.
func signIn(t *testing.T, is *openidtest.Issuer, p *openid.Provider, person openidtest.Person) (openid.Identity, error) {
	t.Helper()
	is.SignIn(person)
	u, f, err := p.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p.Finish(context.Background(), f, authorize(t, u))
}

func wantRefused(t *testing.T, err error, want string) {
	t.Helper()
	if errs.CodeOf(err) != problem.Unauthorized || !strings.Contains(errs.MessageOf(err), want) {
		t.Fatalf("%v, want unauthorized with %q", err, want)
	}
}

// Each check of the ID token refuses the token that fails it, in words
// that say which; an honest token of the same provider passes.
// Mutations tried: the nonce comparison in Finish left out: "a token
// with another sign-in's nonce" is accepted; oidc.Config with
// SkipClientIDCheck: "a token for another client" is accepted; with
// SkipExpiryCheck: "an expired token" is accepted; with
// SkipIssuerCheck: "a token of another issuer" is accepted.
func TestIDTokenChecks(t *testing.T) {
	is := openidtest.New("c1", "secret-1")
	defer is.Close()
	p, err := openid.New(openid.Config{Issuer: is.URL, ClientID: "c1", ClientSecret: "secret-1", RedirectURL: redirect})
	if err != nil {
		t.Fatal(err)
	}
	ana := openidtest.Person{Email: "ana@example.com"}
	for _, tc := range []struct {
		name  string
		fault openidtest.Fault
		want  string
	}{
		{"a token with another sign-in's nonce", openidtest.BadNonce, "does not carry this sign-in's nonce"},
		{"a token for another client", openidtest.WrongAudience, `the ID token is for another application, not client_id "c1"`},
		{"an expired token", openidtest.Expired, "the ID token expired at"},
		{"a token of another issuer", openidtest.WrongIssuer, "was issued by another issuer than"},
		{"a token signed with a key not in the JWKS", openidtest.ForeignKey, "signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is.Misbehave(tc.fault)
			defer is.Misbehave(openidtest.Honest)
			_, err := signIn(t, is, p, ana)
			wantRefused(t, err, tc.want)
		})
	}
	if id, err := signIn(t, is, p, ana); err != nil || id.Name != "ana@example.com" {
		t.Fatalf("an honest token: %+v %v", id, err)
	}
}

// When the person is named by e-mail, the provider must say it verified
// the address (email_verified true, or "true"); a provider that never
// sends the claim is let through only when the operator says so, and an
// address the provider says it did not verify never is. Named by another
// claim, the claim does not matter.
// Mutations tried: a missing claim accepted (the check before): "no
// claim" signs in; EmailVerifiedOptional ignored: "no claim, the
// operator opted out" is refused; the false case let through with the
// opt-out: "false, the operator opted out" signs in; any string read as
// verified: the string "false" signs in.
func TestEmailMustBeVerified(t *testing.T) {
	is := openidtest.New("c1", "secret-1")
	defer is.Close()
	provider := func(cfg openid.Config) *openid.Provider {
		cfg.Issuer, cfg.ClientID, cfg.ClientSecret, cfg.RedirectURL = is.URL, "c1", "secret-1", redirect
		p, err := openid.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	no, yes := false, true
	strict, optional, byName := provider(openid.Config{}), provider(openid.Config{EmailVerifiedOptional: true}), provider(openid.Config{NameClaim: "name"})
	for _, tc := range []struct {
		name   string
		p      *openid.Provider
		person openidtest.Person
		want   string // "": signed in
	}{
		{"verified", strict, openidtest.Person{Email: "ana@example.com", EmailVerified: &yes}, ""},
		{"no claim", strict, openidtest.Person{Email: "ana@example.com", NoEmailVerified: true}, "does not say that the identity provider verified the email ana@example.com"},
		{"false", strict, openidtest.Person{Email: "ana@example.com", EmailVerified: &no}, "has not verified the email ana@example.com"},
		{"no claim, the operator opted out", optional, openidtest.Person{Email: "ana@example.com", NoEmailVerified: true}, ""},
		{"false, the operator opted out", optional, openidtest.Person{Email: "ana@example.com", EmailVerified: &no}, "has not verified the email"},
		{"named by another claim", byName, openidtest.Person{Email: "ana@example.com", NoEmailVerified: true}, ""},
		// Some providers send the claim as a string.
		{`the string "true"`, strict, openidtest.Person{Email: "ana@example.com", EmailVerifiedClaim: "true"}, ""},
		{`the string "false"`, strict, openidtest.Person{Email: "ana@example.com", EmailVerifiedClaim: "false"}, "has not verified the email ana@example.com"},
		{`the string "false", the operator opted out`, optional, openidtest.Person{Email: "ana@example.com", EmailVerifiedClaim: "false"}, "has not verified the email"},
		{`the string "FALSE"`, strict, openidtest.Person{Email: "ana@example.com", EmailVerifiedClaim: "FALSE"}, "has not verified the email"},
		{`an odd string`, strict, openidtest.Person{Email: "ana@example.com", EmailVerifiedClaim: "yes"}, "has not verified the email"},
		{`a number`, strict, openidtest.Person{Email: "ana@example.com", EmailVerifiedClaim: 1}, "does not say that the identity provider verified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := signIn(t, is, tc.p, tc.person)
			if tc.want == "" {
				if err != nil || id.Name != "ana@example.com" {
					t.Fatalf("%+v %v, want signed in", id, err)
				}
				return
			}
			wantRefused(t, err, tc.want)
		})
	}
}
