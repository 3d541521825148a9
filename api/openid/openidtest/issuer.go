// Package openidtest is an OpenID Connect provider for tests: discovery,
// JWKS, an authorize endpoint that signs in whoever the test names at once
// (no login page), and a token endpoint that checks the client secret, the
// redirect URL and the PKCE verifier as real providers do. It can be told
// to misbehave the ways real ones (or an attacker in the middle) do: a
// token for another audience, an expired one, a wrong nonce, another
// issuer, a key that is not in its JWKS.
package openidtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Fault is one way the issuer misbehaves in the ID token it hands out.
type Fault int

const (
	Honest        Fault = iota
	WrongAudience       // aud is another client's
	Expired             // exp is an hour ago
	BadNonce            // nonce is not the one the sign-in sent
	WrongIssuer         // iss is another provider's
	ForeignKey          // signed with a key not in the JWKS
	DiscoveryLies       // discovery names another issuer
)

// Person is who the authorize endpoint signs in.
type Person struct {
	Email         string
	Groups        []string
	EmailVerified *bool // nil: true, as a provider that verified the address says
	// NoEmailVerified leaves the email_verified claim out, as providers
	// that never send it do.
	NoEmailVerified bool
	// EmailVerifiedClaim, when set, is sent as the email_verified claim as
	// it is: the string "true" or "false" some providers send, or an odd
	// value.
	EmailVerifiedClaim any
}

// Issuer is a running test provider.
type Issuer struct {
	*httptest.Server
	ClientID, ClientSecret string

	key, foreign *rsa.PrivateKey

	mu     sync.Mutex
	person Person
	fault  Fault
	codes  map[string]grant
	// Exchanges counts the codes exchanged at the token endpoint.
	Exchanges int
	// LoginPage: the authorize endpoint shows a page whose button (a
	// form of the provider's own site) signs in, as a real provider's
	// login does; the browser then comes back by a navigation the
	// provider's page started, a cross-site one.
	LoginPage bool
}

type grant struct {
	person                               Person
	nonce, challenge, redirect, clientID string
}

// New starts an issuer for one client; it stops with the test's Close.
func New(clientID, clientSecret string) *Issuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	foreign, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	is := &Issuer{ClientID: clientID, ClientSecret: clientSecret, key: key, foreign: foreign, codes: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /jwks", is.jwks)
	mux.HandleFunc("GET /authorize", is.authorize)
	mux.HandleFunc("POST /token", is.token)
	mux.HandleFunc("POST /approve", is.approve)
	is.Server = httptest.NewServer(mux)
	return is
}

// SignIn makes the authorize endpoint sign in p from now on.
func (is *Issuer) SignIn(p Person) { is.mu.Lock(); is.person = p; is.mu.Unlock() }

// Misbehave sets the fault of the tokens (and discovery) from now on.
func (is *Issuer) Misbehave(f Fault) { is.mu.Lock(); is.fault = f; is.mu.Unlock() }

func (is *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	iss := is.URL
	if is.fault == DiscoveryLies {
		iss = "https://elsewhere.example.com"
	}
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                iss,
		"authorization_endpoint":                is.URL + "/authorize",
		"token_endpoint":                        is.URL + "/token",
		"jwks_uri":                              is.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (is *Issuer) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
}

// authorize signs the named person in at once and sends the browser back
// with a code, as a provider does after its login page.
func (is *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != is.ClientID || q.Get("response_type") != "code" {
		http.Error(w, "unknown client or response_type", http.StatusBadRequest)
		return
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "PKCE (S256) is required", http.StatusBadRequest)
		return
	}
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || back.Host == "" {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	is.mu.Lock()
	code := random()
	is.codes[code] = grant{person: is.person, nonce: q.Get("nonce"), challenge: q.Get("code_challenge"),
		redirect: q.Get("redirect_uri"), clientID: q.Get("client_id")}
	login := is.LoginPage
	is.mu.Unlock()
	v := back.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	back.RawQuery = v.Encode()
	if login {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Test IdP</title><form method="post" action="/approve">`+
			`<input type="hidden" name="to" value="%s"><button id="approve">Sign in</button></form>`, html.EscapeString(back.String()))
		return
	}
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// approve is the login page's button: back to the client.
func (is *Issuer) approve(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, r.PostFormValue("to"), http.StatusFound)
}

// token exchanges a code once, checking what a real provider checks.
func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, "invalid_request", err.Error())
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != is.ClientID || secret != is.ClientSecret {
		oauthError(w, "invalid_client", "client authentication failed")
		return
	}
	is.mu.Lock()
	g, found := is.codes[r.PostForm.Get("code")]
	delete(is.codes, r.PostForm.Get("code")) // a code is good once
	fault := is.fault
	is.Exchanges++
	is.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case !found:
		oauthError(w, "invalid_grant", "unknown or used code")
		return
	case g.redirect != r.PostForm.Get("redirect_uri"):
		oauthError(w, "invalid_grant", "redirect_uri differs from the authorization request's")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		oauthError(w, "invalid_grant", "PKCE verification failed")
		return
	}
	now := time.Now()
	claims := map[string]any{
		"iss": is.URL, "sub": "sub-" + g.person.Email, "aud": is.ClientID, "nonce": g.nonce,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "email": g.person.Email, "name": g.person.Email,
	}
	if g.person.Groups != nil {
		claims["groups"] = g.person.Groups
	}
	switch {
	case g.person.NoEmailVerified:
	case g.person.EmailVerifiedClaim != nil:
		claims["email_verified"] = g.person.EmailVerifiedClaim
	case g.person.EmailVerified != nil:
		claims["email_verified"] = *g.person.EmailVerified
	default:
		claims["email_verified"] = true
	}
	key := is.key
	switch fault {
	case WrongAudience:
		claims["aud"] = "another-client"
	case Expired:
		claims["iat"], claims["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
	case BadNonce:
		claims["nonce"] = "not-the-nonce"
	case WrongIssuer:
		claims["iss"] = "https://elsewhere.example.com"
	case ForeignKey:
		key = is.foreign
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		oauthError(w, "server_error", err.Error())
		return
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		oauthError(w, "server_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": random(), "token_type": "Bearer", "expires_in": 3600, "id_token": raw})
}

func oauthError(w http.ResponseWriter, code, desc string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func random() string {
	var b [24]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
