package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Defaults of Config.
const (
	DefaultBodyLimit    = 64 << 10
	DefaultReadTimeout  = 10 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultIdleTimeout  = 120 * time.Second
)

// HSTS is the Strict-Transport-Security of every answer over TLS: one
// year, this host only (subdomains may be other services).
const HSTS = "max-age=31536000"

// Config is what the server needs; cmd/n8n-guard fills it.
type Config struct {
	Store keystore.Store
	// Notifications serves /v1/n8n/error and /v1/notifications; nil
	// answers them with store_unavailable.
	Notifications Notifications
	// What this server offers beyond the store's contract, said by the
	// wiring rather than found by asking the store what it is:
	// Backup serves GET /v1/admin/backup (a bbolt store; nil: 501
	// unsupported, PostgreSQL is backed up with pg_dump);
	// Interactions serves Slack's clicks and notification re-sends (nil:
	// store_unavailable, notifications are not configured);
	// Fault says why the store stopped writing, for /healthz (nil: it
	// cannot say, the answer is ok).
	Backup       Backuper
	Interactions Interactions
	Fault        func() error
	// Tokens are the accepted bearer tokens of /v1 without a scope (role
	// admin, every namespace), named token-1, token-2, ... in order.
	Tokens []string
	// ScopedTokens are named tokens with a role and namespaces (auth.go).
	// Tokens and ScopedTokens together: at least one.
	ScopedTokens []TokenScope
	// Registry receives the server's metrics and is served on /metrics.
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// Version is shown on /healthz.
	Version string
	// Policies are the namespaces' and destinations' settings the console
	// shows parked keys by (parked_limit, the catch-up pace); the zero
	// value: the defaults.
	Policies keystore.Policies

	BodyLimit    int // bytes; default 64 KiB
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// MaxConnections caps open client connections; default 4096.
	MaxConnections int
	// The per-client limits and who a client is (fair.go).
	// TrustedProxies: addresses or CIDR ranges of reverse proxies whose
	// X-Forwarded-For and X-Forwarded-Proto are believed; nobody else's.
	TrustedProxies []string
	// ClientConnections: connections one address may hold before any
	// shows a valid token (default 128; negative: no limit).
	ClientConnections int
	// UnauthenticatedPerMinute: /v1 requests without a valid token one
	// client may send a minute (default 600; negative: no limit).
	UnauthenticatedPerMinute int
	// SignInPerMinute: console sign-in attempts per client a minute
	// (default 10; negative: no limit).
	SignInPerMinute int
	// Console is the console's sign-in: named people, the session key.
	Console ConsoleConfig
	// Namespaces and Destinations named in the configuration keep their
	// own metric label values; others get theirs up to LabelLimit
	// (default 50) distinct values, then share "other" (labels.go).
	Namespaces   []string
	Destinations []string
	LabelLimit   int
}

// Server is the fiber app of the v1 contract.
type Server struct {
	app      *fiber.App
	store    keystore.Store
	notes    Notifications
	backuper Backuper
	slack    Interactions
	fault    func() error
	tokens   tokenSet
	validate *validator.Validate
	metrics  *metrics
	log      *slog.Logger
	version  string
	routes   []route
	draining atomic.Bool
	maxBody  int
	maxConns int
	fair     *fairEdge
	// signInPerMinute: the console's sign-in limit per client (Config).
	signInPerMinute int
	policies        keystore.Policies
	consoleCfg      ConsoleConfig
	// openPaths are the routes of the table without a scope (a route of
	// /v1 may be one, e.g. one signed by its sender instead).
	openPaths map[string]bool

	mu        sync.Mutex
	listeners []net.Listener
	stopped   bool
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
		backuper: cfg.Backup,
		slack:    cfg.Interactions,
		fault:    cfg.Fault,
		validate: newValidator(),
		log:      cfg.Logger,
		version:  cfg.Version,
	}
	var err error
	if s.tokens, err = newTokenSet(cfg.Tokens, cfg.ScopedTokens); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if s.metrics, err = newMetrics(cfg.Registry, cfg.Store, labelConfig{
		namespaces: cfg.Namespaces, destinations: cfg.Destinations,
		limit: orDefault(cfg.LabelLimit, DefaultLabelLimit), log: s.log,
	}); err != nil {
		return nil, fmt.Errorf("api: register metrics: %w", err)
	}
	// A body over the limit is refused from its Content-Length, unread
	// (headerReceived); the connection's careful close lets the 413 reach
	// the client (conns.go).
	s.maxBody = orDefault(cfg.BodyLimit, DefaultBodyLimit)
	s.maxConns = orDefault(cfg.MaxConnections, DefaultMaxConnections)
	s.signInPerMinute = cfg.SignInPerMinute
	s.policies = cfg.Policies
	s.consoleCfg = cfg.Console
	if s.fair, err = newFairEdge(cfg, s.log); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "n8n-guard",
		DisableStartupMessage: true,
		BodyLimit:             s.maxBody,
		ReadTimeout:           orDefault(cfg.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:          orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:           orDefault(cfg.IdleTimeout, DefaultIdleTimeout),
		// X-Forwarded-Proto (c.Secure) only from a configured proxy.
		EnableTrustedProxyCheck: true,
		TrustedProxies:          cfg.TrustedProxies,
		// Errors raised before any route runs end here: no route matched
		// (404), oversized body, unreadable request. Route errors never do.
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			// Without a valid token, /v1 answers 401 whatever else is
			// wrong: a stranger learns neither limits nor routes. (Not
			// after a failed body read: fasthttp has then reset the
			// request, so a chunked body over the small limit of
			// headerReceived, or a slow one, gets its own 413 or 408.)
			if s.needsToken(c.Path()) {
				if _, ok := s.tokens.find(c.Get(fiber.HeaderAuthorization)); !ok {
					s.metrics.refused("", "unauthorized")
					err = unauthorized(c.Get(fiber.HeaderAuthorization))
				}
			}
			s.metrics.observe("unmatched", methodLabel(c.Method()), fiberStatus(err), 0)
			return s.writeError(c, err)
		},
	})
	s.app.Server().HeaderReceived = s.headerReceived
	// No route takes a form: a multipart body must not be parsed (to
	// temporary files) before a handler has checked anything.
	s.app.Server().DisablePreParseMultipartForm = true

	// Served over its own TLS, the guard tells browsers to come back only
	// over https (the console's session cookie is Secure there too).
	s.app.Use(func(c *fiber.Ctx) error {
		if c.Context().IsTLS() {
			c.Set(fiber.HeaderStrictTransportSecurity, HSTS)
		}
		return c.Next()
	})
	metrics := adaptor.HTTPHandler(promhttp.HandlerFor(cfg.Registry,
		promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)}))
	for _, r := range s.table(metrics) {
		s.handle(r)
	}
	if err := s.mountConsole(); err != nil {
		return nil, fmt.Errorf("api: console: %w", err)
	}
	return s, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// handle registers one route of the table. Every route gets the same
// wrapper: panic recovery, the bearer check and scope of its line, errors
// written as problems, one metric sample and one debug log line.
func (s *Server) handle(r route) {
	s.routes = append(s.routes, r)
	method, path, auth, h := r.method, r.path, r.scope != access.Open, r.handle
	if !auth {
		if s.openPaths == nil {
			s.openPaths = map[string]bool{}
		}
		s.openPaths[path] = true
	}
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
			token := tokenName(c.UserContext())
			if auth && token != "none" {
				s.metrics.byToken.WithLabelValues(token, path).Inc()
			}
			if s.log.Enabled(c.UserContext(), slog.LevelDebug) {
				s.log.LogAttrs(c.UserContext(), slog.LevelDebug, "request",
					slog.String("method", method), slog.String("route", path), slog.String("token", token),
					slog.Int("status", status), slog.Duration("took", took))
			}
		}()
		if auth {
			err = s.authorize(c, r)
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

// Route is one registered method and path, in fiber's syntax.
type Route struct {
	Method string
	Path   string
}

// Routes lists the registered routes (for the OpenAPI test and docs).
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.routes))
	for i, r := range s.routes {
		out[i] = Route{Method: r.method, Path: r.path}
	}
	return out
}

// Serve answers requests on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return ln.Close()
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	return s.app.Listener(newConnLimit(ln, s.maxConns, s.metrics, s.log, s.fair))
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

type health struct {
	Status  string `json:"status"`
	Version string `json:"version,omitempty"`
	Store   string `json:"store,omitempty"` // why the store does not write, while it does not
}

func (s *Server) healthz(c *fiber.Ctx) error {
	h := health{Status: "ok", Version: s.version}
	if s.fault != nil {
		if err := s.fault(); err != nil {
			h.Store = errs.MessageOf(err)
		}
	}
	return writeJSON(c, h)
}

func (s *Server) readyz(c *fiber.Ctx) error {
	if s.draining.Load() {
		return errs.Errorf(errs.StoreUnavailable, "shutting down")
	}
	if err := s.store.Ping(c.UserContext()); err != nil {
		return errs.Errorf(errs.StoreUnavailable, "store is not available")
	}
	return writeJSON(c, health{Status: "ready", Version: s.version})
}

func fiberStatus(err error) int {
	return problem.Status(errs.CodeOf(fiberError(err)))
}
