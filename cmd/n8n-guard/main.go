// Command n8n-guard is the n8n-guard service (serve) and its operator
// tools (keys, version), which talk to a running server over HTTP.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/notify"
)

func main() {
	cmd := newRootCmd(os.Getenv, os.Stdout, os.Stderr)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "n8n-guard:", err)
		os.Exit(1)
	}
}

// StoreFile is the bbolt file inside the data folder; notify keeps its
// outbox in the same file.
const StoreFile = "n8n-guard.db"

// Main is the running service: the store, the notification outbox, the
// sweeper and the HTTP server. Run starts them; Close stops them in the
// reverse order. The end-to-end tests drive it the same way main does.
type Main struct {
	Config  Config
	Logger  *slog.Logger
	Version string

	store  keystore.Store
	notes  *notify.Service
	server *api.Server
	ln     net.Listener

	cancel context.CancelFunc // stops the background components
	wg     sync.WaitGroup
	errc   chan error // the first background component that failed
}

// NewMain returns a Main for cfg; nothing runs until Run.
func NewMain(cfg Config, log *slog.Logger) *Main {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Main{Config: cfg, Logger: log, Version: version(), errc: make(chan error, 4)}
}

// Run opens the store, starts the background components and the HTTP
// server, and returns once the server is listening.
func (m *Main) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	cfg := m.Config
	policies, err := cfg.File.Policies()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	checkDataDir(cfg.DataDir, m.Logger)
	tokens, err := apiTokens(cfg.Tokens, cfg.DataDir, m.Logger)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	notifyOpts := notify.Options{
		Token:      cfg.SlackBotToken,
		AppToken:   cfg.SlackAppToken,
		N8nAPIURL:  cfg.N8nAPIURL,
		N8nAPIKey:  cfg.N8nAPIKey,
		APIURL:     cfg.SlackAPIURL,
		Logger:     m.Logger,
		Registerer: reg,
	}
	var db *bbolt.DB // the shared bbolt file, when the store is bbolt
	switch {
	case isPostgresURL(cfg.Store):
		pg, err := postgres.Open(ctx, cfg.Store, postgres.Options{
			Policies: policies,
			Clock:    cfg.Clock,
			Logger:   m.Logger.With("component", "keystore"),
		})
		if err != nil {
			return err
		}
		m.store = pg
		if notifyOpts.Outbox, err = notify.NewPostgresOutbox(ctx, pg.Pool(), notify.PostgresOutboxOptions{}); err != nil {
			return err
		}
		m.Logger.Info("store open", "backend", "postgres")
	case cfg.Store == "":
		path := filepath.Join(cfg.DataDir, StoreFile)
		observer, err := newBoltMetrics(reg, path) // storemetrics.go
		if err != nil {
			return err
		}
		bs, err := bolt.Open(path, bolt.Options{
			Policies: policies,
			Clock:    cfg.Clock,
			Logger:   m.Logger.With("component", "keystore"),
			Observer: observer,
		})
		if err != nil {
			return err
		}
		m.store, db = bs, bs.DB()
		notifyOpts.DB = bs.DB // the store reopens its file after a storage error: the outbox follows
		m.Logger.Info("store open", "backend", "bbolt", "path", path)
	default:
		return fmt.Errorf("--store %q: use a postgres:// URL, or leave it empty for the bbolt file in --data", redactURL(cfg.Store))
	}
	notifyOpts.Events, notifyOpts.Keys = m.store, m.store
	notifyCfg := cfg.File.NotifyConfig()
	notifyCfg.SigningSecret = cfg.SlackSigningSecret
	if m.notes, err = notify.New(db, notifyCfg, notifyOpts); err != nil {
		return err
	}

	if m.server, err = api.New(api.Config{
		Store:         m.store,
		Notifications: m.notes,
		Tokens:        tokens,
		Registry:      reg,
		Logger:        m.Logger.With("component", "api"),
		Version:       m.Version,
		BodyLimit:     cfg.BodyLimit,
		ReadTimeout:   cfg.ReadTimeout,
		WriteTimeout:  cfg.WriteTimeout,
		IdleTimeout:   cfg.IdleTimeout,
		// Scoped tokens, connection cap, metric label bounds (issue 15).
		ScopedTokens:   cfg.ScopedTokens,
		MaxConnections: cfg.MaxConnections,
		Namespaces:     sortedKeys(cfg.File.Namespaces),
		Destinations:   sortedKeys(cfg.File.Destinations),
		LabelLimit:     cfg.File.Metrics.LabelLimit,
	}); err != nil {
		return err
	}
	if m.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}

	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.start("notify", func() error { return m.notes.Run(bg) })
	m.start("slack-socket-mode", func() error { return m.notes.RunSocketMode(bg) })
	sw := sweeper{store: m.store, every: cfg.SweepInterval, log: m.Logger.With("component", "sweeper")}
	m.start("sweeper", func() error { return sw.Run(bg) })
	if err := m.startCatchUp(bg, policies, reg); err != nil { // park.go
		cancel()
		return err
	}
	m.start("http", func() error { return m.server.Serve(m.ln) })
	m.Logger.Info("n8n-guard listening", "addr", m.ln.Addr().String(), "version", m.Version)
	return nil
}

// start runs a background component; its failure ends up on Err.
func (m *Main) start(name string, run func() error) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := run(); err != nil && !errors.Is(err, context.Canceled) {
			m.Logger.Error("component stopped", "component", name, "err", err)
			select {
			case m.errc <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		}
	}()
}

// Err delivers the error of a background component that stopped.
func (m *Main) Err() <-chan error { return m.errc }

// Addr is the address the server listens on (useful with port 0).
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// Close drains in-flight requests, stops the background components and
// closes the store. It is safe after a failed Run.
func (m *Main) Close() error {
	var errs []error
	if m.server != nil && m.ln != nil {
		timeout := m.Config.ShutdownTimeout
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if err := m.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
		cancel()
	}
	if m.ln != nil {
		// Also when Serve has not started yet: it then returns at once.
		m.ln.Close()
	}
	m.server, m.ln = nil, nil
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
	m.wg.Wait()
	if m.notes != nil {
		if err := m.notes.Close(); err != nil {
			errs = append(errs, err)
		}
		m.notes = nil
	}
	if m.store != nil {
		if err := m.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
		m.store = nil
	}
	return errors.Join(errs...)
}

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// redactURL drops a password from a store URL before it is shown.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}
