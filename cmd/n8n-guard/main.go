// Command n8n-guard is the n8n-guard service (serve) and its operator
// tools (keys, version), which talk to a running server over HTTP.
package main

import (
	"context"
	"crypto/tls"
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

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/internal/tlsserve"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	"github.com/n8n-guard/n8n-guard/notify/decision"
	notifypg "github.com/n8n-guard/n8n-guard/notify/postgres"
	"github.com/n8n-guard/n8n-guard/rerun"
	"github.com/n8n-guard/n8n-guard/slack"
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

	store keystore.Store
	// pg is the store when it is PostgreSQL (nil on bbolt): what replicas
	// share lives there (sign-outs, secrets; shared.go).
	pg    *postgres.Store
	notes *notify.Service
	// decisions carries out the clicks on its messages and the console's
	// decisions on failures.
	decisions *decision.Decider
	reruns    *rerun.Runner // nil without n8n's API
	// offWatch tells owners of guarded workflows n8n turned off (nil
	// without n8n's API).
	offWatch *n8n.OffWatch
	server   *api.Server
	ln       net.Listener
	tls      *tlsserve.Server // nil on plain HTTP
	reg      *prometheus.Registry
	// resumeSecret and checkSecret are the credentials of resume and of
	// check calls, one per purpose, the same on every replica (shared.go).
	resumeSecret, checkSecret string

	cancel context.CancelFunc // stops the background components
	wg     sync.WaitGroup
	errc   chan error // the first background component that failed
}

// NewMain returns a Main for cfg; nothing runs until Run.
func NewMain(cfg Config, log *slog.Logger) *Main {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Main{Config: cfg.withDefaults(), Logger: log, Version: version(), errc: make(chan error, 4)}
}

// Run opens the store, starts the background components and the HTTP
// server, and returns once the server is listening. Each component is
// set up by one method below, in the order they depend on each other.
func (m *Main) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	policies, err := m.initPolicies()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(m.Config.DataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	checkDataDir(m.Config.DataDir, m.Logger)
	tokens, err := apiTokens(m.Config.Tokens, m.Config.DataDir, m.Logger)
	if err != nil {
		return err
	}
	m.reg = prometheus.NewRegistry()
	if err := prom.Register(m.reg, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return err
	}
	opened, err := m.openStore(ctx, policies)
	if err != nil {
		return err
	}
	con, err := m.initSecrets(ctx)
	if err != nil {
		return err
	}
	if err := m.initNotify(opened.outbox); err != nil {
		return err
	}
	if err := m.initAPI(policies, tokens, con, opened); err != nil {
		return err
	}
	if err := m.listen(); err != nil {
		return err
	}
	return m.startBackground(ctx, policies)
}

// initPolicies reads the namespaces' and destinations' rules from the
// config file and where resume calls may go, and logs what people should
// know about them.
func (m *Main) initPolicies() (keystore.Policies, error) {
	policies, err := m.Config.File.Policies()
	if err != nil {
		return policies, fmt.Errorf("config: %w", err)
	}
	if policies.Resume, err = m.Config.resumeTargets(); err != nil { // resume.go
		return policies, fmt.Errorf("config: %w", err)
	}
	logResumeTargets(m.Logger, policies.Resume)
	logFourEyes(m.Logger, policies)
	return policies, nil
}

// openedStore is what opening the store gives the other components
// besides Main.store: notify's outbox in the same database, and what only
// a bbolt store offers the API (nil on PostgreSQL, backed up with
// pg_dump).
type openedStore struct {
	outbox notify.Outbox
	backup api.Backuper
	fault  func() error
}

// openStore opens the store of truth: PostgreSQL when --store is a
// postgres:// URL, else the bbolt file in the data folder.
func (m *Main) openStore(ctx context.Context, policies keystore.Policies) (openedStore, error) {
	cfg := m.Config
	switch {
	case isPostgresURL(cfg.Store):
		if len(cfg.Tokens) == 0 {
			// A generated token lives in one replica's data folder: n8n's
			// credential would work on that replica only.
			return openedStore{}, errors.New("--store postgres://...: set N8N_GUARD_TOKENS (the same on every replica); a token generated into each data folder would differ from replica to replica")
		}
		damaged := newDamagedCounter() // storemetrics.go
		if err := prom.Register(m.reg, damaged); err != nil {
			return openedStore{}, err
		}
		pg, err := postgres.Open(ctx, cfg.Store, postgres.Options{
			Policies: policies,
			Clock:    cfg.Clock,
			Logger:   m.Logger.With("component", "keystore"),
			Damaged:  damaged.Inc,
		})
		if err != nil {
			return openedStore{}, err
		}
		m.store, m.pg = pg, pg
		outbox, err := notifypg.New(ctx, pg.Pool(), notifypg.Options{})
		if err != nil {
			return openedStore{}, err
		}
		m.Logger.Info("store open", "backend", "postgres")
		return openedStore{outbox: outbox}, nil
	case cfg.Store == "":
		path := filepath.Join(cfg.DataDir, StoreFile)
		observer, err := newBoltMetrics(m.reg, path) // storemetrics.go
		if err != nil {
			return openedStore{}, err
		}
		bs, err := bolt.Open(path, bolt.Options{
			Policies: policies,
			Clock:    cfg.Clock,
			Logger:   m.Logger.With("component", "keystore"),
			Observer: observer,
			// A backup restored in place is refused unless this says so.
			AcceptRestore: cfg.AcceptRestore,
		})
		if err != nil {
			return openedStore{}, err
		}
		m.store = bs
		// The store reopens its file after a storage error: the outbox asks
		// for it at each use.
		outbox, err := notifybolt.New(bs.DB)
		if err != nil {
			return openedStore{}, fmt.Errorf("notify outbox: %w", err)
		}
		m.Logger.Info("store open", "backend", "bbolt", "path", path)
		return openedStore{outbox: outbox, backup: bs, fault: bs.Fault}, nil
	}
	return openedStore{}, fmt.Errorf("--store %q: use a postgres:// URL, or leave it empty for the bbolt file in --data", redactURL(cfg.Store))
}

// initSecrets loads or creates what replicas must agree on (on
// PostgreSQL in the database, on bbolt in the data folder; shared.go):
// the console's session key, the resume and the check credentials. It
// returns the console's config with its links, key and sign-out list.
func (m *Main) initSecrets(ctx context.Context) (api.ConsoleConfig, error) {
	cfg := m.Config
	con := cfg.Console
	// The console's links: n8n's address people open, and Slack's.
	con.N8nURL, con.SlackWorkspace, con.Hint = cfg.n8nLinkBase(), cfg.File.Notify.SlackWorkspace, slack.HintOf
	if cfg.N8nAPIURL != "" && cfg.N8nAPIKey != "" { // the key page names the holder's workflow
		con.WorkflowName = n8n.New(cfg.N8nAPIURL, cfg.N8nAPIKey, 5*time.Second).WorkflowName
	}
	var err error
	if con.SessionKey, err = m.secret(ctx, consoleKeySecret, cfg.ConsoleSessionKey); err != nil {
		return con, fmt.Errorf("console session key: %w", err)
	}
	if m.pg != nil {
		con.SignOuts = m.pg
	} else {
		con.SignOutFile = filepath.Join(cfg.DataDir, ConsoleSignOutFile)
	}
	resume, err := m.secret(ctx, resumeSecretSpec, cfg.ResumeSecret)
	if err != nil {
		return con, fmt.Errorf("resume secret: %w", err)
	}
	m.resumeSecret = string(resume)
	check, err := m.secret(ctx, checkSecretSpec, cfg.CheckSecret)
	if err != nil {
		return con, fmt.Errorf("check secret: %w", err)
	}
	m.checkSecret = string(check)
	return con, nil
}

// initNotify sets up the notification service over outbox and the
// decisions on its messages: Slack when a bot token is set, "Retry
// execution" when n8n's API is.
func (m *Main) initNotify(outbox notify.Outbox) error {
	c := m.Config
	// Parking: the outage messages show the parked counts.
	opts := notify.Options{Logger: m.Logger, Registerer: m.reg, Outbox: outbox, Events: m.store, Keys: m.store, Parking: m.store, Clock: c.Clock}
	var reruns interface{ Kick() }
	if c.SlackBotToken != "" {
		opts.Slack = slack.New(slack.Options{Token: c.SlackBotToken, APIURL: c.SlackAPIURL})
	}
	if c.N8nAPIURL != "" && c.N8nAPIKey != "" {
		client := n8n.New(c.N8nAPIURL, c.N8nAPIKey, 2*time.Minute)
		opts.Executions = n8n.Retrier{Client: client}
		var err error
		m.reruns, err = rerun.New(m.store, n8n.Rerunner{Client: client}, rerun.Options{Logger: m.Logger.With("component", "reruns"), Clock: c.Clock, Registerer: m.reg, Reads: c.RerunReads, Grace: c.ShutdownTimeout})
		if err != nil {
			return err
		}
		reruns = m.reruns // "Retry execution" of an execution at its re-run gate allows its re-run
	} else {
		m.Logger.Info("re-runs of n8n executions are off: set N8N_API_URL and N8N_API_KEY to allow them")
	}
	var err error
	if m.notes, err = notify.New(c.File.NotifyConfig(), opts); err != nil {
		return err
	}
	m.decisions, err = decision.New(decision.Options{Notes: m.notes, Outbox: outbox, Slack: opts.Slack, Keys: m.store, Executions: opts.Executions,
		Reruns: reruns, Logger: m.Logger, Registerer: m.reg, Clock: c.Clock})
	if err == nil && c.N8nAPIURL != "" && c.N8nAPIKey != "" {
		notes := m.notes
		m.offWatch = &n8n.OffWatch{Client: n8n.New(c.N8nAPIURL, c.N8nAPIKey, time.Minute), Logger: m.Logger.With("component", "n8n-off-watch"),
			Tell: func(ctx context.Context, o n8n.Off) error {
				_, err := notes.TellWorkflowOff(ctx, notify.WorkflowOff{WorkflowID: o.WorkflowID, WorkflowName: o.WorkflowName, Episode: o.Episode, Text: o.Text})
				return err
			}}
	}
	return err
}

// initAPI builds the HTTP server: the API, Slack's interactions and the
// console.
func (m *Main) initAPI(policies keystore.Policies, tokens []string, con api.ConsoleConfig, opened openedStore) (err error) {
	cfg := m.Config
	var reruns api.Reruns
	if m.reruns != nil {
		reruns = m.reruns
	}
	notes := notifications{m.notes, m.decisions, slack.NewInteractions(cfg.SlackSigningSecret, m.decisions, m.Logger)}
	m.server, err = api.New(api.Config{
		Reruns:        reruns,
		Store:         m.store,
		Notifications: notes,
		Interactions:  notes,
		Backup:        opened.backup,
		Fault:         opened.fault,
		Tokens:        tokens,
		Registry:      m.reg,
		Logger:        m.Logger.With("component", "api"),
		Version:       m.Version,
		Limits:        cfg.HTTP,
		ScopedTokens:  cfg.ScopedTokens,
		// Metric label bounds.
		Namespaces:   sortedKeys(cfg.File.Namespaces),
		Destinations: sortedKeys(cfg.File.Destinations),
		LabelLimit:   cfg.File.Metrics.LabelLimit,
		Policies:     policies,
		Console:      con,
	})
	return err
}

// listen opens the listener, with TLS when it is configured.
func (m *Main) listen() (err error) {
	if m.ln, err = net.Listen("tcp", m.Config.Addr); err != nil {
		return fmt.Errorf("listen on %s: %w", m.Config.Addr, err)
	}
	if m.tls, err = tlsserve.New(m.Config.TLS, m.Config.DataDir, m.ln.Addr().String(), m.Logger.With("component", "tls")); err != nil {
		return err
	}
	if m.tls != nil {
		m.ln = tls.NewListener(m.ln, m.tls.Config)
	}
	return nil
}

// startBackground starts notify, Slack's socket mode, the sweeper, the
// catch-up, the checks and the HTTP server, each in its own goroutine
// until Close.
func (m *Main) startBackground(ctx context.Context, policies keystore.Policies) error {
	cfg := m.Config
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.start("notify", func() error { return m.notes.Run(bg) })
	socket := slack.NewSocketMode(cfg.SlackAppToken, slack.Options{APIURL: cfg.SlackAPIURL}, m.decisions, m.Logger)
	m.start("slack-socket-mode", func() error { return socket.Run(bg) })
	sw := sweeper{store: m.store, every: cfg.SweepInterval, log: m.Logger.With("component", "sweeper")}
	m.start("sweeper", func() error { return sw.Run(bg) })
	if m.reruns != nil {
		m.start("reruns", func() error { m.reruns.Run(bg); return nil })
	}
	if m.offWatch != nil {
		m.start("n8n-off-watch", func() error { m.offWatch.Run(bg); return nil })
	}
	if err := m.startCatchUp(bg, policies, m.reg); err != nil { // park.go
		cancel()
		return err
	}
	if err := m.startChecks(bg, m.reg); err != nil { // checks.go
		cancel()
		return err
	}
	// Serve gets the server and listener now: a Close right after Run
	// clears the fields before this goroutine may have run.
	srv, ln := m.server, m.ln
	m.start("http", func() error { return srv.Serve(ln) })
	if m.tls.Redirects() {
		m.start("http-redirect", m.tls.ServeRedirect)
	}
	m.Logger.Info("n8n-guard listening", "addr", m.ln.Addr().String(), "tls", m.tls != nil, "version", m.Version)
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

// Close stops the background components, drains in-flight requests and
// closes the store. It is safe after a failed Run.
func (m *Main) Close() error {
	var errs []error
	// The background components are told first: a call to n8n in flight
	// has its grace (the shutdown timeout, catchup and rerun Options.Grace)
	// while the requests drain, so a stop takes the longer of the two,
	// not their sum.
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
	if m.server != nil && m.ln != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownTimeout)
		if err := m.server.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
		if err := m.tls.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http redirect shutdown: %w", err))
		}
		cancel()
	}
	if m.ln != nil {
		// Also when Serve has not started yet: it then returns at once.
		m.ln.Close()
	}
	m.server, m.ln = nil, nil
	m.wg.Wait()
	if m.decisions != nil {
		if err := m.decisions.Close(); err != nil {
			errs = append(errs, err)
		}
		m.decisions = nil
	}
	m.notes = nil
	if m.store != nil {
		if err := m.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
		m.store, m.pg = nil, nil
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

// notifications is what the API and the console serve of notify: the
// service, the decisions on its messages (the console's on failures), and
// Slack's interactivity requests checked by the slack package.
type notifications struct {
	*notify.Service
	*decision.Decider
	*slack.Interactions
}
