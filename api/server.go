package api

import (
	"cmp"
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

// Reruns is the part of rerun.Runner the API and the console use: a
// grant was made, start its re-run.
type Reruns interface{ Kick() }

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
	// Reruns starts the re-runs of n8n executions a person allows
	// (package rerun); nil: a resolve with rerun is refused (unsupported),
	// the guard has no n8n API to call.
	Reruns Reruns
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

	// Limits are the server's bounds and timeouts (serve's flags).
	Limits
	// Console is the console's sign-in: named people, the session key.
	Console ConsoleConfig
	// Namespaces and Destinations named in the configuration keep their
	// own metric label values; others get theirs up to LabelLimit
	// (default DefaultLabelLimit, 50; zero or negative: the default)
	// distinct values, then share "other" (labels.go).
	Namespaces   []string
	Destinations []string
	LabelLimit   int
	// Clock is the time the per-token intake limit reads (nil: time.Now).
	Clock func() time.Time
}

// Limits are the server's bounds and timeouts, as the operator sets them
// (serve's flags). Zero is the default; so is a negative size or timeout,
// while a negative per-client limit means no limit.
type Limits struct {
	// BodyLimit: the largest request body in bytes (default
	// DefaultBodyLimit, 64 KiB).
	BodyLimit int
	// ReadTimeout, WriteTimeout and IdleTimeout: reading a request,
	// writing an answer, an idle keep-alive connection (defaults
	// DefaultReadTimeout 10 s, DefaultWriteTimeout 10 s,
	// DefaultIdleTimeout 120 s).
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// MaxConnections caps open client connections (default
	// DefaultMaxConnections, 4096).
	MaxConnections int
	// The per-client limits and who a client is (fair.go).
	// TrustedProxies: addresses or CIDR ranges of reverse proxies whose
	// X-Forwarded-For and X-Forwarded-Proto are believed; nobody else's.
	TrustedProxies []string
	// ClientConnections: connections one address may hold before any
	// shows a valid token (default DefaultClientConnections, 128;
	// negative: no limit).
	ClientConnections int
	// UnauthenticatedPerMinute: /v1 requests without a valid token one
	// client may send a minute (default DefaultUnauthenticatedPerMinute,
	// 600; negative: no limit).
	UnauthenticatedPerMinute int
	// SignInPerMinute: console sign-in attempts per client a minute
	// (default DefaultSignInPerMinute, 10; negative: no limit).
	SignInPerMinute int
	// IntakePerMinute: failures one token may report on /v1/n8n/error a
	// minute (default DefaultIntakePerMinute, 120; negative: no limit).
	IntakePerMinute int
}

// WithDefaults fills in every default of the limits, as their comments
// say: the one place they are applied (New, and serve's flags show them).
func (l Limits) WithDefaults() Limits {
	// A zero or negative size or timeout is the default.
	l.BodyLimit = cmp.Or(max(l.BodyLimit, 0), DefaultBodyLimit)
	l.ReadTimeout = cmp.Or(max(l.ReadTimeout, 0), DefaultReadTimeout)
	l.WriteTimeout = cmp.Or(max(l.WriteTimeout, 0), DefaultWriteTimeout)
	l.IdleTimeout = cmp.Or(max(l.IdleTimeout, 0), DefaultIdleTimeout)
	l.MaxConnections = cmp.Or(max(l.MaxConnections, 0), DefaultMaxConnections)
	// A zero per-client limit is the default; a negative one, no limit.
	l.ClientConnections = cmp.Or(l.ClientConnections, DefaultClientConnections)
	l.UnauthenticatedPerMinute = cmp.Or(l.UnauthenticatedPerMinute, DefaultUnauthenticatedPerMinute)
	l.SignInPerMinute = cmp.Or(l.SignInPerMinute, DefaultSignInPerMinute)
	l.IntakePerMinute = cmp.Or(l.IntakePerMinute, DefaultIntakePerMinute)
	return l
}

// withDefaults fills in every default of Config, as its comments say.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	cfg.LabelLimit = cmp.Or(max(cfg.LabelLimit, 0), DefaultLabelLimit)
	return cfg
}

// Server is the fiber app of the v1 contract.
type Server struct {
	app      *fiber.App
	store    keystore.Store
	notes    Notifications
	backuper Backuper
	slack    Interactions
	fault    func() error
	reruns   Reruns
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
	intake   *intakeLimit
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
	cfg = cfg.withDefaults()
	s := &Server{
		store:    cfg.Store,
		notes:    cfg.Notifications,
		backuper: cfg.Backup,
		slack:    cfg.Interactions,
		fault:    cfg.Fault,
		reruns:   cfg.Reruns,
		validate: newValidator(),
		log:      cfg.Logger,
		version:  cfg.Version,
		// A body over the limit is refused from its Content-Length, unread
		// (headerReceived); the connection's careful close lets the 413
		// reach the client (conns.go).
		maxBody:         cfg.BodyLimit,
		maxConns:        cfg.MaxConnections,
		signInPerMinute: cfg.SignInPerMinute,
		policies:        cfg.Policies,
		consoleCfg:      cfg.Console,
	}
	var err error
	if s.tokens, err = newTokenSet(cfg.Tokens, cfg.ScopedTokens); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if s.metrics, err = newMetrics(cfg.Registry, cfg.Store, labelConfig{
		namespaces: cfg.Namespaces, destinations: cfg.Destinations, limit: cfg.LabelLimit, log: s.log,
	}); err != nil {
		return nil, fmt.Errorf("api: register metrics: %w", err)
	}
	if s.fair, err = newFairEdge(cfg, s.log); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if s.intake, err = newIntakeLimit(cfg.IntakePerMinute, cfg.Registry, s.log, cfg.Clock); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.app = s.newApp(cfg.Limits)
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

// newApp is the fiber app with the limits and the handling every request
// gets before its route: the body check, the unmatched answer, HSTS.
func (s *Server) newApp(l Limits) *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:               "n8n-guard",
		DisableStartupMessage: true,
		BodyLimit:             l.BodyLimit,
		ReadTimeout:           l.ReadTimeout,
		WriteTimeout:          l.WriteTimeout,
		IdleTimeout:           l.IdleTimeout,
		// X-Forwarded-Proto (c.Secure) only from a configured proxy.
		EnableTrustedProxyCheck: true,
		TrustedProxies:          l.TrustedProxies,
		ErrorHandler:            s.unmatched,
	})
	app.Server().HeaderReceived = s.headerReceived
	// No route takes a form: a multipart body must not be parsed (to
	// temporary files) before a handler has checked anything.
	app.Server().DisablePreParseMultipartForm = true
	app.Use(strictTransport)
	return app
}

// unmatched answers the errors raised before any route runs: no route
// matched (404), oversized body, unreadable request. Route errors never
// end here.
func (s *Server) unmatched(c *fiber.Ctx, err error) error {
	// Without a valid token, /v1 answers 401 whatever else is wrong: a
	// stranger learns neither limits nor routes. (Not after a failed body
	// read: fasthttp has then reset the request, so a chunked body over
	// the small limit of headerReceived, or a slow one, gets its own 413
	// or 408.)
	if s.needsToken(c.Path()) {
		if _, ok := s.tokens.find(c.Get(fiber.HeaderAuthorization)); !ok {
			s.metrics.refused("", "unauthorized")
			err = unauthorized(c.Get(fiber.HeaderAuthorization))
		}
	}
	s.metrics.observe("unmatched", methodLabel(c.Method()), fiberStatus(err), 0)
	return s.writeError(c, err)
}

// strictTransport tells browsers, when the guard is served over its own
// TLS, to come back only over https (the console's session cookie is
// Secure there too).
func strictTransport(c *fiber.Ctx) error {
	if c.Context().IsTLS() {
		c.Set(fiber.HeaderStrictTransportSecurity, HSTS)
	}
	return c.Next()
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
