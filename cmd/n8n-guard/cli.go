package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/internal/tune"
)

// Defaults of serve.
const (
	DefaultAddr    = "127.0.0.1:8080"
	DefaultDataDir = "./n8n-guard-data"
)

func newRootCmd(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "n8n-guard",
		Short:         "Idempotency keys and loud failures for n8n automations",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	co := &clientOptions{getenv: getenv}
	root.AddCommand(
		newServeCmd(getenv),
		newKeysCmd(co),
		newNotificationsCmd(co),
		newDestinationsCmd(co), // destinations.go
		newVersionCmd(co),
		newN8NCmd(getenv),
		newBackupCmd(co),
		newStoreCmd(),
		newProbeCmd(), // probe.go
	)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return applyEnv(cmd.Flags(), getenv)
	}
	return root
}

// envAnnotation marks a flag with its environment variable.
const envAnnotation = "n8n-guard/env"

// bindEnv binds a flag to an environment variable: the variable applies
// when the flag is not given on the command line.
func bindEnv(fs *pflag.FlagSet, flag, env string) {
	f := fs.Lookup(flag)
	f.Usage += " (env " + env + ")"
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[envAnnotation] = []string{env}
}

// applyEnv sets every unset flag that has a variable in the environment,
// with the flag's own parsing, so a bad value is a clear error.
func applyEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		envs := f.Annotations[envAnnotation]
		if err != nil || f.Changed || len(envs) == 0 {
			return
		}
		if v := getenv(envs[0]); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", envs[0], v, serr)
			}
		}
	})
	return err
}

type serveFlags struct {
	addr, data, config, store string
	bodyLimit                 int
	maxConnections            int
	trustedProxies            []string
	clientConnections         int
	unauthPerMinute           int
	signInPerMinute           int
	readTimeout               time.Duration
	writeTimeout              time.Duration
	idleTimeout               time.Duration
	shutdownTimeout           time.Duration
	sweepInterval             time.Duration
	logLevel, logFormat       string
	acceptRestore             bool
}

func newServeCmd(getenv func(string) string) *cobra.Command {
	var f serveFlags
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the n8n-guard HTTP service",
		Long: `Run the n8n-guard HTTP service.

API tokens come from N8N_GUARD_TOKENS (comma-separated). Without it, a token
is generated on first start and kept in <data>/api-token (mode 0600); on
PostgreSQL (several replicas) N8N_GUARD_TOKENS is required.
The console's session key (N8N_GUARD_CONSOLE_SESSION_KEY) and the resume
secret (N8N_GUARD_RESUME_SECRET) are made on first start when not set: in
the data folder, or on PostgreSQL in the database, shared by every replica.
Slack delivery uses SLACK_BOT_TOKEN and SLACK_API_URL; button clicks arrive
over HTTP (SLACK_SIGNING_SECRET) or Socket Mode (SLACK_APP_TOKEN).
N8N_API_URL and N8N_API_KEY (n8n's public API) enable "Retry execution";
the console links executions and workflows to N8N_URL (default: N8N_API_URL's n8n).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), f.logLevel, f.logFormat)
			if err != nil {
				return err
			}
			cfg := Config{
				Addr: f.addr, TLS: tf.config(), DataDir: f.data, ConfigFile: f.config, Store: f.store,
				Tokens:    splitTokens(getenv("N8N_GUARD_TOKENS")),
				BodyLimit: f.bodyLimit, ReadTimeout: f.readTimeout, WriteTimeout: f.writeTimeout,
				IdleTimeout: f.idleTimeout, ShutdownTimeout: f.shutdownTimeout, SweepInterval: f.sweepInterval,
				SlackBotToken:      getenv("SLACK_BOT_TOKEN"),
				SlackAPIURL:        getenv("SLACK_API_URL"),
				SlackSigningSecret: getenv("SLACK_SIGNING_SECRET"),
				SlackAppToken:      getenv("SLACK_APP_TOKEN"),
				N8nAPIURL:          getenv("N8N_API_URL"),
				N8nAPIKey:          getenv("N8N_API_KEY"),
				N8nURL:             getenv("N8N_URL"),
				ResumeSecret:       getenv("N8N_GUARD_RESUME_SECRET"),
				ConsoleSessionKey:  getenv("N8N_GUARD_CONSOLE_SESSION_KEY"),
				CheckSecret:        getenv("N8N_GUARD_CHECK_SECRET"),
				ResumeOrigins:      splitTokens(getenv("N8N_GUARD_RESUME_ORIGINS")),
				ResumePath:         getenv("N8N_GUARD_RESUME_PATH"),
			}
			if cfg.ConfigFile != "" {
				if cfg.File, err = LoadFile(cfg.ConfigFile); err != nil {
					return err
				}
			}
			cfg.MaxConnections = f.maxConnections
			cfg.AcceptRestore = f.acceptRestore
			cfg.TrustedProxies, cfg.ClientConnections = f.trustedProxies, f.clientConnections
			cfg.UnauthenticatedPerMinute, cfg.SignInPerMinute = f.unauthPerMinute, f.signInPerMinute
			if cfg.ScopedTokens, err = cfg.File.ScopedTokens(getenv); err != nil {
				return fmt.Errorf("config %s: %w", cfg.ConfigFile, err)
			}
			if cfg.Console, err = cfg.File.ConsoleSignIn(getenv, os.ReadFile); err != nil {
				return fmt.Errorf("config %s: %w", cfg.ConfigFile, err)
			}
			return serve(cmd, cfg, log)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.addr, "addr", DefaultAddr, "address to listen on")
	fs.StringVar(&f.data, "data", DefaultDataDir, "data folder (store file, generated API token)")
	fs.StringVar(&f.config, "config", "", "YAML configuration file (namespaces, destinations, notify, owners)")
	fs.StringVar(&f.store, "store", "", "store: empty for the bbolt file in --data, or a postgres:// URL (several n8n-guard processes on one database)")
	fs.IntVar(&f.bodyLimit, "body-limit", api.DefaultBodyLimit, "largest request body in bytes")
	fs.IntVar(&f.maxConnections, "max-connections", api.DefaultMaxConnections, "most client connections open at once; more are answered 503 overloaded")
	fs.StringSliceVar(&f.trustedProxies, "trusted-proxies", nil, "reverse proxies (IPs or CIDR ranges, comma-separated) whose X-Forwarded-For and X-Forwarded-Proto are believed; nobody else's")
	fs.IntVar(&f.clientConnections, "client-connections", api.DefaultClientConnections, "connections one client address may hold before any shows a valid token; more are answered 429 rate_limited (-1: no limit)")
	fs.IntVar(&f.unauthPerMinute, "unauthenticated-per-minute", api.DefaultUnauthenticatedPerMinute, "/v1 requests without a valid token one client may send a minute; more are answered 429 rate_limited (-1: no limit)")
	fs.IntVar(&f.signInPerMinute, "signin-per-minute", api.DefaultSignInPerMinute, "console sign-in attempts one client may make a minute (-1: no limit)")
	fs.DurationVar(&f.readTimeout, "read-timeout", api.DefaultReadTimeout, "time to read a request")
	fs.DurationVar(&f.writeTimeout, "write-timeout", api.DefaultWriteTimeout, "time to write an answer")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", api.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long shutdown waits for in-flight requests")
	fs.DurationVar(&f.sweepInterval, "sweep-interval", DefaultSweepInterval, "how often expired leases and records are swept")
	fs.BoolVar(&f.acceptRestore, "accept-restore", false, "start on a bbolt store file older than the one this data folder last served (a backup restored in place), logging what the restore lost; once (docs/runbooks.md, \"Restoring a backup\")")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug (one line per request), info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	tf.add(fs) // tls.go
	for flag, env := range map[string]string{
		"addr": "N8N_GUARD_ADDR", "data": "N8N_GUARD_DATA", "config": "N8N_GUARD_CONFIG", "store": "N8N_GUARD_STORE",
		"body-limit": "N8N_GUARD_BODY_LIMIT", "max-connections": "N8N_GUARD_MAX_CONNECTIONS", "read-timeout": "N8N_GUARD_READ_TIMEOUT",
		"trusted-proxies": "N8N_GUARD_TRUSTED_PROXIES", "client-connections": "N8N_GUARD_CLIENT_CONNECTIONS",
		"unauthenticated-per-minute": "N8N_GUARD_UNAUTHENTICATED_PER_MINUTE", "signin-per-minute": "N8N_GUARD_SIGNIN_PER_MINUTE",
		"write-timeout": "N8N_GUARD_WRITE_TIMEOUT", "idle-timeout": "N8N_GUARD_IDLE_TIMEOUT",
		"shutdown-timeout": "N8N_GUARD_SHUTDOWN_TIMEOUT", "sweep-interval": "N8N_GUARD_SWEEP_INTERVAL",
		"log-level": "N8N_GUARD_LOG_LEVEL", "log-format": "N8N_GUARD_LOG_FORMAT",
	} {
		bindEnv(fs, flag, env)
	}
	return cmd
}

// serve runs Main until SIGTERM or SIGINT, then drains and closes it.
func serve(cmd *cobra.Command, cfg Config, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if cfg.Store == "" {
		defer tune.Procs()()
	}
	defer tune.GC()()
	m := NewMain(cfg, log)
	if err := m.Run(ctx); err != nil {
		return err
	}
	var err error
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining in-flight requests")
	case err = <-m.Err():
		log.Error("shutting down after a component failed", "err", err)
	}
	stop()
	if cerr := m.Close(); cerr != nil {
		log.Error("shutdown", "err", cerr)
		if err == nil {
			err = cerr
		}
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: use text or json", format)
}
