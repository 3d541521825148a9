package console

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/n8n-guard/n8n-guard/api/access"

	"github.com/n8n-guard/n8n-guard/internal/edge"
)

// A session is what a sign-in leaves in the server: who it acts for and the
// CSRF token its forms carry. Sessions live in memory only: a restart
// signs everybody out, which is safer than keeping them in the store next
// to the keys, and costs a person one more sign-in.
type session struct {
	id      string
	who     access.Principal
	csrf    string
	expires time.Time
}

type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	ttl  time.Duration
	max  int
	log  *slog.Logger
}

func newSessions(ttl time.Duration, max int, log *slog.Logger) *sessions {
	return &sessions{byID: map[string]*session{}, ttl: ttl, max: max, log: log}
}

// randomID returns 256 random bits, URL-safe.
func randomID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// start opens a session for who. When the table is full, expired sessions
// go first, then the one closest to its end.
func (s *sessions) start(who access.Principal, now time.Time) *session {
	sess := &session{id: randomID(), who: who, csrf: randomID(), expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= s.max {
		var oldest *session
		for id, x := range s.byID {
			if !now.Before(x.expires) {
				delete(s.byID, id)
			} else if oldest == nil || x.expires.Before(oldest.expires) {
				oldest = x
			}
		}
		if len(s.byID) >= s.max && oldest != nil {
			delete(s.byID, oldest.id)
			s.log.Warn("console: too many sessions; ended the oldest", "max", s.max, "token", oldest.who.Name)
		}
	}
	s.byID[sess.id] = sess
	return sess
}

// get returns the live session with id, or nil.
func (s *sessions) get(id string, now time.Time) *session {
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.byID[id]
	if sess == nil {
		return nil
	}
	if !now.Before(sess.expires) {
		delete(s.byID, id)
		return nil
	}
	return sess
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}

// cookieName: over TLS the __Host- prefix makes the browser refuse the
// cookie unless it is Secure, host-only and for path /.
func cookieName(c *fiber.Ctx) string {
	if c.Secure() {
		return "__Host-n8n-guard-ui"
	}
	return "n8n-guard-ui"
}

func setSessionCookie(c *fiber.Ctx, sess *session) {
	c.Cookie(&fiber.Cookie{
		Name:     cookieName(c),
		Value:    sess.id,
		Path:     "/",
		Expires:  sess.expires,
		HTTPOnly: true,
		Secure:   c.Secure(),
		SameSite: fiber.CookieSameSiteStrictMode,
	})
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
// minute (in bursts of as many) when Config leaves it 0.
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
	if perMinute == 0 {
		perMinute = DefaultSignInPerMinute
	}
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
