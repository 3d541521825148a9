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

	"github.com/n8n-guard/n8n-guard/internal/tune"
)

// Defaults of serve (NewConfig).
const (
	DefaultAddr            = "127.0.0.1:8080"
	DefaultDataDir         = "./n8n-guard-data"
	DefaultShutdownTimeout = 10 * time.Second
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

// serveLong is serve's help: where the secrets and integrations come from.
const serveLong = `Run the n8n-guard HTTP service.

API tokens come from N8N_GUARD_TOKENS (comma-separated). Without it, a token
is generated on first start and kept in <data>/api-token (mode 0600); on
PostgreSQL (several replicas) N8N_GUARD_TOKENS is required.
The console's session key (N8N_GUARD_CONSOLE_SESSION_KEY) and the resume
secret (N8N_GUARD_RESUME_SECRET) are made on first start when not set: in
the data folder, or on PostgreSQL in the database, shared by every replica.
Slack delivery uses SLACK_BOT_TOKEN and SLACK_API_URL; button clicks arrive
over HTTP (SLACK_SIGNING_SECRET) or Socket Mode (SLACK_APP_TOKEN).
N8N_API_URL and N8N_API_KEY (n8n's public API; scopes execution:read,
execution:list, execution:retry, workflow:read and workflow:list: docs/n8n.md,
"The n8n API key's scopes") enable "Retry execution", the watch for workflows
n8n turns off, and re-runs of executions
waiting at their re-run gate (docs/api.md);
the console links executions and workflows to N8N_URL (default: N8N_API_URL's n8n).`

// logFlags are serve's --log-level and --log-format.
type logFlags struct{ level, format string }

func newServeCmd(getenv func(string) string) *cobra.Command {
	cfg := NewConfig() // the flags write into it, from its defaults
	var tf tlsFlags
	var lf logFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the n8n-guard HTTP service",
		Long:  serveLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd.ErrOrStderr(), lf.level, lf.format)
			if err != nil {
				return err
			}
			cfg.TLS = tf.config()
			if err := cfg.applyEnvAndFile(getenv); err != nil {
				return err
			}
			return serve(cmd, cfg, log)
		},
	}
	fs := cmd.Flags()
	addServeFlags(fs, &cfg, &lf)
	tf.add(fs) // tls.go
	return cmd
}

// addServeFlags binds serve's flags to the fields of cfg they set, with
// cfg's values as their defaults, and each flag to its variable.
func addServeFlags(fs *pflag.FlagSet, cfg *Config, lf *logFlags) {
	h := &cfg.HTTP
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "address to listen on")
	fs.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data folder (store file, generated API token)")
	fs.StringVar(&cfg.ConfigFile, "config", "", "YAML configuration file (namespaces, destinations, notify, owners)")
	fs.StringVar(&cfg.Store, "store", "", "store: empty for the bbolt file in --data, or a postgres:// URL (several n8n-guard processes on one database)")
	fs.IntVar(&h.BodyLimit, "body-limit", h.BodyLimit, "largest request body in bytes")
	fs.IntVar(&h.MaxConnections, "max-connections", h.MaxConnections, "most client connections open at once; more are answered 503 overloaded")
	fs.StringSliceVar(&h.TrustedProxies, "trusted-proxies", nil, "reverse proxies (IPs or CIDR ranges, comma-separated) whose X-Forwarded-For and X-Forwarded-Proto are believed; nobody else's")
	fs.IntVar(&h.ClientConnections, "client-connections", h.ClientConnections, "connections one client address may hold before any shows a valid token; more are answered 429 rate_limited (-1: no limit)")
	fs.IntVar(&h.UnauthenticatedPerMinute, "unauthenticated-per-minute", h.UnauthenticatedPerMinute, "/v1 requests without a valid token one client may send a minute; more are answered 429 rate_limited (-1: no limit)")
	fs.IntVar(&h.SignInPerMinute, "signin-per-minute", h.SignInPerMinute, "console sign-in attempts one client may make a minute (-1: no limit)")
	fs.IntVar(&h.IntakePerMinute, "intake-per-minute", h.IntakePerMinute, "failures one token may report on /v1/n8n/error a minute; more are answered 429 rate_limited (-1: no limit)")
	bindEnv(fs, "intake-per-minute", "N8N_GUARD_INTAKE_PER_MINUTE")
	fs.Float64Var(&cfg.RerunReads, "n8n-api-reads-per-second", cfg.RerunReads, "re-runs asked of n8n's API a second at most, whatever their destinations (each reads the whole execution; -1: no cap)")
	bindEnv(fs, "n8n-api-reads-per-second", "N8N_GUARD_N8N_API_READS_PER_SECOND")
	fs.DurationVar(&h.ReadTimeout, "read-timeout", h.ReadTimeout, "time to read a request")
	fs.DurationVar(&h.WriteTimeout, "write-timeout", h.WriteTimeout, "time to write an answer")
	fs.DurationVar(&h.IdleTimeout, "idle-timeout", h.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long shutdown waits for in-flight requests, and for n8n to answer a resume or re-run call in flight")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", cfg.SweepInterval, "how often expired leases and records are swept")
	fs.BoolVar(&cfg.AcceptRestore, "accept-restore", false, "start on a bbolt store file older than the one this data folder last served (a backup restored in place), logging what the restore lost; once (docs/runbooks.md, \"Restoring a backup\")")
	fs.StringVar(&lf.level, "log-level", "info", "debug (one line per request), info, warn or error")
	fs.StringVar(&lf.format, "log-format", "text", "text or json")
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
}

// applyEnvAndFile reads what only the environment sets (tokens, secrets,
// Slack, n8n) and the YAML file, after the flags have been parsed.
func (c *Config) applyEnvAndFile(getenv func(string) string) (err error) {
	c.Tokens = splitTokens(getenv("N8N_GUARD_TOKENS"))
	c.SlackBotToken, c.SlackAPIURL = getenv("SLACK_BOT_TOKEN"), getenv("SLACK_API_URL")
	c.SlackSigningSecret, c.SlackAppToken = getenv("SLACK_SIGNING_SECRET"), getenv("SLACK_APP_TOKEN")
	c.N8nAPIURL, c.N8nAPIKey, c.N8nURL = getenv("N8N_API_URL"), getenv("N8N_API_KEY"), getenv("N8N_URL")
	c.N8nWebhookURL = getenv("N8N_WEBHOOK_URL")
	c.ResumeSecret = getenv("N8N_GUARD_RESUME_SECRET")
	c.ConsoleSessionKey = getenv("N8N_GUARD_CONSOLE_SESSION_KEY")
	c.CheckSecret = getenv("N8N_GUARD_CHECK_SECRET")
	c.ResumeOrigins, c.ResumePath = splitTokens(getenv("N8N_GUARD_RESUME_ORIGINS")), getenv("N8N_GUARD_RESUME_PATH")
	if c.ConfigFile != "" {
		if c.File, err = LoadFile(c.ConfigFile); err != nil {
			return err
		}
	}
	if c.ScopedTokens, err = c.File.ScopedTokens(getenv); err != nil {
		return fmt.Errorf("config %s: %w", c.ConfigFile, err)
	}
	if c.Console, err = c.File.ConsoleSignIn(getenv, os.ReadFile); err != nil {
		return fmt.Errorf("config %s: %w", c.ConfigFile, err)
	}
	return nil
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
