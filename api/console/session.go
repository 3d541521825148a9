package console

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/n8n-guard/n8n-guard/api/access"
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
