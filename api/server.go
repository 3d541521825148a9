package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// bodyReadLimit: bodies up to this size are read even when over the
// configured limit, so their 413 reaches the client (see New).
const bodyReadLimit = 1 << 20

// Defaults of Config.
const (
	DefaultBodyLimit    = 64 << 10
	DefaultReadTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultIdleTimeout  = 120 * time.Second
)

// Config is what the server needs; cmd/n8n-guard fills it.
type Config struct {
	Store keystore.Store
	// Notifications serves /v1/n8n/error and /v1/notifications; nil
	// answers them with store_unavailable.
	Notifications Notifications
	// Tokens are the accepted bearer tokens of /v1; at least one.
	Tokens []string
	// Registry receives the server's metrics and is served on /metrics.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// Version is shown on /healthz.
	Version string

	BodyLimit    int // bytes; default 64 KiB
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
}

// Server is the fiber app of the v1 contract.
type Server struct {
	app      *fiber.App
	store    keystore.Store
	notes    Notifications
	tokens   [][sha256.Size]byte
	validate *validator.Validate
	metrics  *metrics
	log      *slog.Logger
	version  string
	routes   []Route
	draining atomic.Bool
	maxBody  int

	mu        sync.Mutex
	listeners []net.Listener
	stopped   bool
}

// Route is one registered method and path, in fiber's syntax.
type Route struct {
	Method string
	Path   string
}

// New builds the server and registers its routes and metrics.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("api: no store")
	}
	if cfg.Registry == nil {
		return nil, errors.New("api: no metrics registry")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		store:    cfg.Store,
		notes:    cfg.Notifications,
		validate: newValidator(),
		log:      cfg.Logger,
		version:  cfg.Version,
	}
	for _, t := range cfg.Tokens {
		if t = strings.TrimSpace(t); t != "" {
			s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
		}
	}
	if len(s.tokens) == 0 {
		return nil, errors.New("api: no API token configured")
	}
	var err error
	if s.metrics, err = newMetrics(cfg.Registry, cfg.Store); err != nil {
		return nil, fmt.Errorf("api: register metrics: %w", err)
	}
	// A body over the limit is read to its end (up to bodyReadLimit) and
	// answered 413 by handle, on a connection that stays open. Left to
	// fasthttp, the 413 is written and the connection closed with the body
	// unread, and the kernel may turn that close into a reset that loses
	// the answer before the client reads it.
	s.maxBody = orDefault(cfg.BodyLimit, DefaultBodyLimit)
	s.app = fiber.New(fiber.Config{
		AppName:               "n8n-guard",
		DisableStartupMessage: true,
		BodyLimit:             max(4*s.maxBody, bodyReadLimit),
		ReadTimeout:           orDefault(cfg.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:          orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:           orDefault(cfg.IdleTimeout, DefaultIdleTimeout),
		// Errors raised before any route runs end here: no route matched
		// (404), oversized body, unreadable request. Route errors never do.
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			s.metrics.observe("unmatched", methodLabel(c.Method()), fiberStatus(err), 0)
			return s.writeError(c, err)
		},
	})

	open, authed := false, true
	s.handle(fiber.MethodGet, "/healthz", open, s.healthz)
	s.handle(fiber.MethodGet, "/readyz", open, s.readyz)
	s.handle(fiber.MethodGet, "/metrics", open, adaptor.HTTPHandler(
		promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)})))
	s.handle(fiber.MethodPost, "/v1/reserve", authed, s.reserve)
	s.handle(fiber.MethodPost, "/v1/complete", authed, s.complete)
	s.handle(fiber.MethodPost, "/v1/fail", authed, s.fail)
	s.handle(fiber.MethodPost, "/v1/resolve", authed, s.resolve)
	s.handle(fiber.MethodGet, "/v1/lookup", authed, s.lookup)
	s.handle(fiber.MethodGet, "/v1/keys", authed, s.listKeys)
	s.handle(fiber.MethodGet, "/v1/destinations", authed, s.destinations)
	s.handle(fiber.MethodPost, "/v1/n8n/error", authed, s.n8nError)
	s.handle(fiber.MethodGet, "/v1/notifications", authed, s.notifications)
	return s, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// handle registers one route. Every route gets the same wrapper: panic
// recovery, the bearer check for /v1, errors written as problems, one
// metric sample and one debug log line.
func (s *Server) handle(method, path string, auth bool, h fiber.Handler) {
	s.routes = append(s.routes, Route{Method: method, Path: path})
	observe := s.metrics.route(path, method)
	s.app.Add(method, path, func(c *fiber.Ctx) (err error) {
		start := time.Now()
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in handler", "path", path, "panic", p, "stack", string(debug.Stack()))
				err = s.writeError(c, fmt.Errorf("panic: %v", p))
			}
			status := c.Response().StatusCode()
			took := time.Since(start)
			observe(status, took)
			if s.log.Enabled(c.UserContext(), slog.LevelDebug) {
				s.log.LogAttrs(c.UserContext(), slog.LevelDebug, "request",
					slog.String("method", method), slog.String("route", path),
					slog.Int("status", status), slog.Duration("took", took))
			}
		}()
		if len(c.Request().Body()) > s.maxBody {
			err = bodyTooLarge()
		} else if auth {
			err = s.authorize(c)
		}
		if err == nil {
			err = h(c)
		}
		if err != nil {
			return s.writeError(c, err)
		}
		return nil
	})
}

// Routes lists the registered routes (for the OpenAPI test and docs).
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// Serve answers requests on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return ln.Close()
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	return s.app.Listener(ln)
}

// Shutdown stops accepting connections and waits for in-flight requests,
// at most until ctx ends. /readyz answers 503 from here on.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	s.stopped = true
	lns := s.listeners
	s.mu.Unlock()
	err := s.app.ShutdownWithContext(ctx)
	// fasthttp closes only the listeners Serve had registered when Shutdown
	// began; closing ours too ends a Serve that was just starting.
	for _, ln := range lns {
		ln.Close()
	}
	return err
}

// authorize checks the bearer token in constant time: every configured
// token is compared, always, against hashes of equal length.
func (s *Server) authorize(c *fiber.Ctx) error {
	h := c.Get(fiber.HeaderAuthorization)
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return keystore.Errorf(keystore.EUnauthorized, "send Authorization: Bearer <token>")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for i := range s.tokens {
		match |= subtle.ConstantTimeCompare(sum[:], s.tokens[i][:])
	}
	if match != 1 {
		return keystore.Errorf(keystore.EUnauthorized, "the bearer token is not valid")
	}
	return nil
}

type health struct {
	Status  string `json:"status"`
	Version string `json:"version,omitempty"`
	Store   string `json:"store,omitempty"` // why the store does not write, while it does not
}

// faulted is a store that can say why it stopped writing (the bbolt
// store, after a storage error), without a round trip.
type faulted interface{ Fault() error }

func (s *Server) healthz(c *fiber.Ctx) error {
	h := health{Status: "ok", Version: s.version}
	if f, ok := s.store.(faulted); ok {
		if err := f.Fault(); err != nil {
			h.Store = keystore.ErrorMessage(err)
		}
	}
	return writeJSON(c, h)
}

func (s *Server) readyz(c *fiber.Ctx) error {
	if s.draining.Load() {
		return keystore.Errorf(keystore.EStoreUnavailable, "shutting down")
	}
	if err := s.store.Ping(c.UserContext()); err != nil {
		return keystore.Errorf(keystore.EStoreUnavailable, "store is not available")
	}
	return writeJSON(c, health{Status: "ready", Version: s.version})
}

func fiberStatus(err error) int {
	return statusOf(keystore.ErrorCode(fiberError(err)))
}
