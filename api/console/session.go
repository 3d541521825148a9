package console

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/n8n-guard/n8n-guard/api/access"

	"github.com/n8n-guard/n8n-guard/internal/durable"
	"github.com/n8n-guard/n8n-guard/internal/edge"
)

// A session is what a sign-in leaves in the browser: who it acts for and
// the CSRF token its forms carry, sealed (AES-256-GCM) in the cookie with
// the console's session key. Nothing of it is kept in the server, so a
// restart of the guard (or another replica with the same key) keeps
// everyone signed in, and a form sent across a restart is still accepted.
// The key lives in the data folder (cmd/n8n-guard); deleting it ends every
// session. Sealed rather than stored in the database: a session is not
// the keys' business, and a second write path for every page view next to
// the reserves would cost them.
type session struct {
	id      string
	who     access.Principal
	csrf    string
	expires time.Time
	// via names how the session signed in: "OIDC" or "shared token".
	via string
	// groups: the person's groups that the people rules name (the others
	// would only make the cookie larger).
	groups []string
}

// sealedSession is a session as its cookie holds it.
type sealedSession struct {
	ID      string           `json:"i"`
	Who     access.Principal `json:"w"`
	CSRF    string           `json:"c"`
	Expires time.Time        `json:"e"`
	Via     string           `json:"v"`
	Groups  []string         `json:"g,omitempty"`
}

// Sign-in methods, as the console and the histories name them.
const (
	viaOIDC  = "OIDC"
	viaToken = "shared token"
)

// by names who decided, for a key's history: the person and how they
// signed in, or the shared token's name (as before named people).
func (s *session) by() string {
	if s.via == viaOIDC {
		return s.who.Name + " (console, OIDC)"
	}
	if person := s.who.PersonName; person != "" {
		return person + " (console, token " + s.who.Name + ")" // a token that names its person
	}
	return "console: " + s.who.Name
}

// sealer seals small values for the browser to keep: it can neither
// read nor change them. purpose is bound into each seal, so a sign-in's
// flow can never pass for a session.
type sealer struct{ aead cipher.AEAD }

// SessionKeySize is the length of Config.SessionKey.
const SessionKeySize = 32

func newSealer(key []byte) (*sealer, error) {
	if len(key) != SessionKeySize {
		return nil, fmt.Errorf("console: the session key has %d bytes, want %d", len(key), SessionKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

type sealed struct {
	Expires time.Time       `json:"e"`
	Value   json.RawMessage `json:"v"`
}

func (s *sealer) seal(purpose string, v any, expires time.Time) (string, error) {
	inner, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	plain, err := json.Marshal(sealed{Expires: expires, Value: inner})
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(purpose))), nil
}

// open fills v from text sealed for purpose; false for anything forged,
// sealed with another key or for another purpose, or expired.
func (s *sealer) open(purpose, text string, now time.Time, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil || len(b) < s.aead.NonceSize() {
		return false
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(purpose))
	if err != nil {
		return false
	}
	var x sealed
	if json.Unmarshal(plain, &x) != nil || !now.Before(x.Expires) {
		return false
	}
	return json.Unmarshal(x.Value, v) == nil
}

// sessions opens and seals session cookies, and remembers sign-outs until
// the sessions they ended would have expired. With a file (Config.
// SignOutFile, in the data folder next to the session key) the sign-outs
// survive a restart: a copy of a signed-out cookie stays refused until its
// end. Without one they are in memory only, which is why the sign-out also
// clears the cookie and the TTL is hours, not days.
type sessions struct {
	seal *sealer
	ttl  time.Duration
	max  int
	log  *slog.Logger
	file string // "": in memory only
	// shared keeps the sign-outs where every replica sees them (Config.
	// SignOuts, the database); nil: this process's map (and file) only.
	shared SignOuts

	mu    sync.Mutex
	ended map[string]time.Time // session id -> its expiry
}

func newSessions(seal *sealer, ttl time.Duration, max int, log *slog.Logger) *sessions {
	return &sessions{seal: seal, ttl: ttl, max: max, log: log, ended: map[string]time.Time{}}
}

// keepSignOuts reads the sign-outs of file (one "<session id> <expiry,
// unix seconds>" a line; missing: none yet), drops the expired ones and
// writes the rest back, so the file holds at most the sessions of one TTL.
// Later sign-outs are appended to it.
func (s *sessions) keepSignOuts(file string, now time.Time) error {
	b, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("console: read the sign-outs %s: %w", file, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.file = file
	for _, line := range strings.Split(string(b), "\n") {
		id, exp, ok := strings.Cut(strings.TrimSpace(line), " ")
		sec, err := strconv.ParseInt(exp, 10, 64)
		if !ok || err != nil || id == "" {
			continue // a line cut short by a crash: its session's cookie was cleared anyway
		}
		if at := time.Unix(sec, 0); now.Before(at) && len(s.ended) < s.max {
			s.ended[id] = at
		}
	}
	return s.rewrite()
}

// rewrite writes every remembered sign-out to the file, whole (s.mu held).
func (s *sessions) rewrite() error {
	var b strings.Builder
	for id, exp := range s.ended {
		fmt.Fprintf(&b, "%s %d\n", id, exp.Unix())
	}
	if err := durable.Replace(s.file, []byte(b.String())); err != nil {
		return fmt.Errorf("console: write the sign-outs %s: %w", s.file, err)
	}
	return nil
}

// appendSignOut adds one sign-out to the file, synced (s.mu held).
func (s *sessions) appendSignOut(id string, exp time.Time) error {
	f, err := os.OpenFile(s.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %d\n", id, exp.Unix())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// randomID returns 256 random bits, URL-safe.
func randomID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// start opens a session for who, signed in via.
func (s *sessions) start(who access.Principal, via string, now time.Time) *session {
	return &session{id: randomID(), who: who, csrf: randomID(), expires: now.Add(s.ttl), via: via}
}

// get returns the live session sealed in cookie, or nil. With shared
// sign-outs a session another replica signed out is refused too; when they
// cannot be read the session is refused (fail closed: the console needs
// the database anyway).
func (s *sessions) get(ctx context.Context, cookie string, now time.Time) *session {
	if cookie == "" {
		return nil
	}
	var x sealedSession
	if !s.seal.open("session", cookie, now, &x) {
		return nil
	}
	s.mu.Lock()
	_, ended := s.ended[x.ID]
	s.mu.Unlock()
	if ended {
		return nil
	}
	if s.shared != nil {
		gone, err := s.shared.SignedOut(ctx, x.ID)
		if err != nil {
			s.log.Warn("console: the shared sign-outs cannot be read; the session is refused until they can", "err", err)
			return nil
		}
		if gone {
			return nil
		}
	}
	return &session{id: x.ID, who: x.Who, csrf: x.CSRF, expires: x.Expires, via: x.Via, groups: x.Groups}
}

// end remembers a sign-out, in the file too when there is one. When too
// many are remembered, the expired go first, then the one closest to its
// end (logged). A sign-out the file could not keep is logged: it holds
// until a restart.
func (s *sessions) end(ctx context.Context, sess *session, now time.Time) {
	if s.shared != nil {
		if err := s.shared.SignOut(ctx, sess.id, sess.expires); err != nil {
			s.log.Warn("console: a sign-out could not be kept for the other replicas; there a copy of its cookie works until it expires",
				"expires", sess.expires, "err", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pruned := len(s.ended) >= s.max
	defer func() {
		if s.file == "" {
			return
		}
		var err error
		if pruned {
			err = s.rewrite()
		} else {
			err = s.appendSignOut(sess.id, sess.expires)
		}
		if err != nil {
			s.log.Warn("console: a sign-out could not be written to the data folder; after a restart a copy of its cookie would work again until it expires",
				"file", s.file, "expires", sess.expires, "err", err)
		}
	}()
	if len(s.ended) >= s.max {
		oldest, oldestAt := "", time.Time{}
		for id, exp := range s.ended {
			if !now.Before(exp) {
				delete(s.ended, id)
			} else if oldest == "" || exp.Before(oldestAt) {
				oldest, oldestAt = id, exp
			}
		}
		if len(s.ended) >= s.max {
			delete(s.ended, oldest)
			s.log.Warn("console: too many sign-outs remembered; forgot the one closest to its end", "max", s.max)
		}
	}
	s.ended[sess.id] = sess.expires
}

// cookieName: over TLS the __Host- prefix makes the browser refuse the
// cookie unless it is Secure, host-only and for path /.
func cookieName(c *fiber.Ctx) string {
	if c.Secure() {
		return "__Host-n8n-guard-ui"
	}
	return "n8n-guard-ui"
}

func (s *sessions) setCookie(c *fiber.Ctx, sess *session) error {
	v, err := s.seal.seal("session", sealedSession{ID: sess.id, Who: sess.who, CSRF: sess.csrf, Expires: sess.expires, Via: sess.via, Groups: sess.groups}, sess.expires)
	if err != nil {
		return err
	}
	c.Cookie(&fiber.Cookie{
		Name:     cookieName(c),
		Value:    v,
		Path:     "/",
		Expires:  sess.expires,
		HTTPOnly: true,
		Secure:   c.Secure(),
		SameSite: fiber.CookieSameSiteStrictMode,
	})
	return nil
}

func clearSessionCookie(c *fiber.Ctx) {
	c.Cookie(&fiber.Cookie{
		Name:     cookieName(c),
		Value:    "",
		Path:     "/",
		Expires:  time.Unix(0, 0),
		HTTPOnly: true,
		Secure:   c.Secure(),
		SameSite: fiber.CookieSameSiteStrictMode,
	})
}

// formBody is a field of a urlencoded POST body, and only of the body: a
// CSRF token or an API token in the query string would be in logs,
// history and Referer headers, and a link could carry it.
func formBody(c *fiber.Ctx, name string) string {
	return string(c.Request().PostArgs().Peek(name))
}

// DefaultSignInPerMinute is the sign-in attempts one client may make a
// minute (in bursts of as many) when Config leaves it 0 (withDefaults).
const DefaultSignInPerMinute = 10

// signInLimit bounds each client's sign-in attempts, so that tokens
// cannot be guessed at the speed of the server.
type signInLimit struct {
	limiter  *edge.Limiter
	clientOf func(*fiber.Ctx) netip.Addr
	log      *slog.Logger

	mu       sync.Mutex
	lastLog  time.Time
	sinceLog int
}

func newSignInLimit(perMinute int, clientOf func(*fiber.Ctx) netip.Addr, log *slog.Logger) *signInLimit {
	if clientOf == nil {
		clientOf = func(c *fiber.Ctx) netip.Addr {
			a, _ := netip.AddrFromSlice(c.Context().RemoteIP())
			return a.Unmap()
		}
	}
	return &signInLimit{limiter: edge.NewLimiter(perMinute, perMinute), clientOf: clientOf, log: log}
}

func (l *signInLimit) perMinute() int                 { return l.limiter.PerMinute() }
func (l *signInLimit) client(c *fiber.Ctx) netip.Addr { return l.clientOf(c) }

// refuse charges one attempt to the request's client; when the client has
// none left it returns the seconds to wait. Refusals are logged at most
// once a minute.
func (l *signInLimit) refuse(c *fiber.Ctx, now time.Time) (wait int, refused bool) {
	client := l.clientOf(c)
	ok, d := l.limiter.Allow(client, now)
	if ok {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sinceLog++
	if now.Sub(l.lastLog) >= time.Minute {
		l.log.Warn("console: sign-in attempts refused: one client is over its limit",
			"client", client.String(), "per_minute", l.perMinute(), "refused_since_last_log", l.sinceLog)
		l.lastLog, l.sinceLog = now, 0
	}
	return max(int(d.Seconds()+0.999), 1), true
}

// SignOuts keeps sign-outs where every replica of the guard sees them, so
// that a session signed out through one is refused by all (replicas sit
// behind one address without sticky sessions). keystore/postgres.Store
// implements it.
type SignOuts interface {
	// SignOut records that the session id ended; it may be forgotten
	// after expires (the cookie's seal refuses it from then on anyway).
	SignOut(ctx context.Context, id string, expires time.Time) error
	// SignedOut reports whether the session id was signed out.
	SignedOut(ctx context.Context, id string) (bool, error)
}
