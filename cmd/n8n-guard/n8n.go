package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/n8nsetup"
)

// n8nFlags are the flags of `n8n-guard n8n ...`, which talk to n8n's public
// API, not to the guard.
type n8nFlags struct {
	n8nURL, apiKey string
	tag, project   string
	timeout        time.Duration
	// webhookURL is n8n's WEBHOOK_URL, where its resume URLs start
	// (default: n8nURL); config the guard's configuration file, for its
	// n8n.resume_origins.
	webhookURL, config string
	// version is the n8n version the operator says n8n is (--n8n-version):
	// 2.x and later tell theirs to no API key.
	version string
}

func (f *n8nFlags) add(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.n8nURL, "n8n-url", "http://localhost:5678", "base URL of n8n")
	fs.StringVar(&f.apiKey, "api-key", "", "n8n API key (n8n: Settings → n8n API)")
	fs.StringVar(&f.tag, "tag", "", "only workflows with this tag")
	fs.StringVar(&f.project, "project", "", "only workflows of this project (its id)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "timeout of each call to n8n")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "n8n's WEBHOOK_URL, where its resume URLs start (default: --n8n-url)")
	fs.StringVar(&f.config, "config", "", "the guard's configuration file, for its n8n.resume_origins")
	fs.StringVar(&f.version, "n8n-version", "", "n8n's version (e.g. 3.4.4 or 3.x), where n8n does not tell it: 2.x and later tell it only to a logged-in user or at /metrics (N8N_METRICS=true)")
	bindEnv(fs, "n8n-url", "N8N_URL")
	bindEnv(fs, "api-key", "N8N_API_KEY")
	bindEnv(fs, "config", "N8N_GUARD_CONFIG")
	bindEnv(fs, "n8n-version", "N8N_VERSION")
	bindEnv(fs, "webhook-url", "N8N_WEBHOOK_URL")
}

// resumeTargets are the n8n instances the guard accepts resume URLs of,
// found as serve finds them: N8N_GUARD_RESUME_ORIGINS, else the
// configuration file's n8n.resume_origins, else N8N_URL's and
// N8N_API_URL's origins; and N8N_WEBHOOK_URL (else n8n.webhook_url). The
// guard's variable, not --webhook-url: that flag says what n8n does, the
// variable what the guard accepts.
func (f *n8nFlags) resumeTargets(getenv func(string) string) (keystore.ResumeTargets, error) {
	c := Config{ResumeOrigins: splitTokens(getenv("N8N_GUARD_RESUME_ORIGINS")), ResumePath: getenv("N8N_GUARD_RESUME_PATH"),
		N8nURL: f.n8nURL, N8nAPIURL: getenv("N8N_API_URL"), N8nWebhookURL: getenv("N8N_WEBHOOK_URL")}
	if f.config != "" {
		fc, err := LoadFile(f.config)
		if err != nil {
			return keystore.ResumeTargets{}, err
		}
		c.File = fc
	}
	return c.resumeTargets()
}

// resumeOrigin says where the guard accepts resume URLs and whether the
// ones n8n builds (from its WEBHOOK_URL, webhookBase) are among them;
// warn is true when they are not: the shipped parking workflows' reserves
// would be refused (400, rule resume_unconfigured or resume_origin).
func resumeOrigin(t keystore.ResumeTargets, webhookBase string) (text string, warn bool) {
	base := strings.TrimRight(webhookBase, "/")
	fix := fmt.Sprintf("start the guard with N8N_GUARD_RESUME_ORIGINS=%s (or n8n.resume_origins: [%s] in its configuration file), or, when that address is public and the guard reaches n8n privately, N8N_WEBHOOK_URL=%s (n8n.webhook_url) beside N8N_URL=<the private address>, so the guard calls the resume URLs there", base, base, base)
	if !t.Configured() {
		return "the guard has no n8n address for resume calls: parking is off and reserves with resume_url are refused (rule resume_unconfigured); " + fix, true
	}
	if why := t.Refuses(base + t.Path() + "1"); why != "" {
		return fmt.Sprintf("n8n's resume URLs start with %s (n8n's WEBHOOK_URL), which the guard does not accept (it accepts %s at %s): its resume_url %s; %s",
			base, strings.Join(t.Origins(), ", "), t.Path(), why, fix), true
	}
	return fmt.Sprintf("the guard accepts n8n's resume URLs: %s at %s", strings.Join(t.Origins(), ", "), t.Path()), false
}

// printResumeOrigin prints resumeOrigin's line for the n8n at inst.
func (f *n8nFlags) printResumeOrigin(w io.Writer, getenv func(string) string, inst *n8nsetup.Instance) error {
	t, err := f.resumeTargets(getenv)
	if err != nil {
		return err
	}
	webhook := f.webhookURL
	if webhook == "" {
		webhook = inst.Client.Base()
	}
	text, warn := resumeOrigin(t, webhook)
	if warn {
		fmt.Fprintf(w, "  WARNING: %s\n", text)
	} else {
		fmt.Fprintf(w, "  %s\n", text)
	}
	return nil
}

// connect finds out which n8n answers and refuses one it cannot serve.
func (f *n8nFlags) connect(cmd *cobra.Command) (*n8nsetup.Instance, error) {
	return f.connectSaying(cmd, cmd.OutOrStdout())
}

// connectSaying connects and says which n8n answered on w (stderr where
// stdout is for scripts).
func (f *n8nFlags) connectSaying(cmd *cobra.Command, w io.Writer) (*n8nsetup.Instance, error) {
	if f.apiKey == "" {
		return nil, errors.New("no n8n API key: set N8N_API_KEY or --api-key (n8n: Settings → n8n API)")
	}
	inst, err := n8nsetup.Connect(cmd.Context(), n8n.New(f.n8nURL, f.apiKey, f.timeout), f.version)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(w, n8nsetup.Describe(inst.Version, inst.Client.Base()))
	return inst, nil
}

func (f *n8nFlags) scope() n8n.Filter {
	return n8n.Filter{Tag: f.tag, ProjectID: f.project}
}

// printReport prints what setup or check did, line by line.
func printReport(w io.Writer, rep *n8nsetup.Report) {
	for _, s := range rep.Steps {
		switch s.Kind {
		case n8nsetup.Change:
			verb := ""
			if rep.DryRun {
				verb = "would "
			}
			fmt.Fprintf(w, "  %s%s\n", verb, s.Text)
		case n8nsetup.NotDone:
			fmt.Fprintf(w, "  NOT DONE: %s\n", s.Text)
		case n8nsetup.Note:
			fmt.Fprintf(w, "  note: %s\n", s.Text)
		case n8nsetup.Warning:
			fmt.Fprintf(w, "  WARNING: %s\n", s.Text)
		}
	}
}

func newN8NCmd(getenv func(string) string) *cobra.Command {
	var f n8nFlags
	cmd := &cobra.Command{
		Use:   "n8n",
		Short: "Wire an n8n instance to n8n-guard through n8n's public API",
		Long: `Wire an n8n instance to n8n-guard through n8n's public API (X-N8N-API-KEY).

n8n has no instance-wide error workflow: every workflow must name one in its
settings, and a new workflow names none. setup installs n8n-guard's error
handler and names it in every workflow that has none; check lists the
workflows whose failures nobody would hear of; audit lists every node that
writes to another system without the guard in front of it, and guard puts
the guard in front of one.`,
	}
	f.add(cmd)
	cmd.AddCommand(newN8NSetupCmd(&f, getenv), newN8NCheckCmd(&f, getenv), newN8NAuditCmd(&f), newN8NGuardCmd(&f, getenv))
	return cmd
}

// n8nSetupLong is the help of n8n setup.
const n8nSetupLong = `Install n8n-guard's error handler and make it the error workflow of every
workflow (or of those with --tag / --project) that has none. Idempotent: a
second run changes nothing. Nothing is unpublished and nothing is published
but the error handler: n8n 2.x does not version settings, so the error
workflow takes effect at once and unpublished edits stay unpublished.
--dry-run prints what would change; what cannot be done is printed as NOT
DONE and makes the command fail.

The error handler reads the guard's address from its Config node (--guard-url)
and the token from the n8n credential "n8n-guard API token" (Header Auth);
--create-credential creates it from N8N_GUARD_TOKEN (or the first of
N8N_GUARD_TOKENS, or <data>/api-token).

Workflows that park events while a destination is paused (the shipped lead
and booking workflows) wait in a Wait node that checks the guard's resume
calls with the credential "n8n-guard resume" (Header Auth X-N8n-Guard-Resume);
--create-credential creates it from N8N_GUARD_RESUME_SECRET, else the
database of guards on PostgreSQL (--store / N8N_GUARD_STORE), else
<data>/resume-secret, and setup wires every such Wait node to it.

Checks (workflows the guard asks before it pages a person) answer only the
guard's check calls, with the credential "n8n-guard check" (Header Auth
X-N8n-Guard-Check), a secret of its own: --create-credential creates it from
N8N_GUARD_CHECK_SECRET, else the guards' database, else <data>/check-secret,
and setup wires every check's webhook to it, also a check that still checks
the resume credential.

setup prints where the guard accepts resume URLs (N8N_GUARD_RESUME_ORIGINS,
else the --config file's n8n.resume_origins, else N8N_URL's origin) and warns
when n8n's (its WEBHOOK_URL, --webhook-url, default --n8n-url) are not among
them.`

func newN8NSetupCmd(f *n8nFlags, getenv func(string) string) *cobra.Command {
	var (
		o          n8nsetup.SetupOptions
		createCred bool
		data       string
		store      string
	)
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Install the error handler (published on 2.x) and make it every workflow's error workflow",
		Long:  n8nSetupLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if createCred {
				tok, err := setupToken(cmd.OutOrStdout(), getenv, data)
				if err != nil {
					return err
				}
				o.Token = tok
				// A store that cannot be read (a placeholder URL, the
				// database down) costs only the credential of that secret:
				// the API-token credential, the error handler and the rest
				// are still done, and setup says NOT DONE where a workflow
				// needs the missing credential, as for a guard never started.
				o.ResumeSecret = setupSecretOrWarn(cmd.Context(), cmd.OutOrStdout(), getenv, data, store, resumeSecretSpec)
				o.CheckSecret = setupSecretOrWarn(cmd.Context(), cmd.OutOrStdout(), getenv, data, store, checkSecretSpec)
			}
			inst, err := f.connect(cmd)
			if err != nil {
				return err
			}
			if err := f.printResumeOrigin(cmd.OutOrStdout(), getenv, inst); err != nil {
				return err
			}
			o.Scope = f.scope()
			rep, err := inst.Setup(cmd.Context(), o)
			printReport(cmd.OutOrStdout(), rep)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), rep.Summary())
			return rep.Err()
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.GuardURL, "guard-url", "", "address at which n8n reaches n8n-guard, e.g. http://host.docker.internal:8080")
	fs.BoolVar(&createCred, "create-credential", false, "create the n8n credentials \"n8n-guard API token\", \"n8n-guard resume\" (parking workflows, and n8n guard --park later) and (for checks) \"n8n-guard check\" if they are missing")
	fs.StringVar(&data, "data", DefaultDataDir, "data folder whose api-token, resume-secret and check-secret are used when N8N_GUARD_TOKEN / N8N_GUARD_RESUME_SECRET / N8N_GUARD_CHECK_SECRET are not set")
	fs.StringVar(&store, "store", "", "the guards' PostgreSQL URL: the resume and check secrets they share are read there when N8N_GUARD_RESUME_SECRET / N8N_GUARD_CHECK_SECRET are not set")
	fs.BoolVar(&o.Examples, "examples", false, "also install the example workflows (lead to CRM, booking confirmation), unpublished")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print what would change and change nothing")
	bindEnv(fs, "guard-url", "N8N_GUARD_URL")
	bindEnv(fs, "data", "N8N_GUARD_DATA")
	bindEnv(fs, "store", "N8N_GUARD_STORE")
	return cmd
}

// setupToken is the guard token the credential gets, found the way the
// operator commands find theirs. Of several N8N_GUARD_TOKENS it takes
// the first, and says so on w: n8n's credential should hold a token of
// its own (N8N_GUARD_TOKEN), not a person's or one about to be rotated.
func setupToken(w io.Writer, getenv func(string) string, data string) (string, error) {
	tok, err := guardToken(getenv, data)
	if err != nil {
		return "", fmt.Errorf("--create-credential needs the guard's token: set N8N_GUARD_TOKEN or point --data at the guard's data folder (%w)", err)
	}
	if strings.TrimSpace(getenv("N8N_GUARD_TOKEN")) == "" {
		if n := len(splitTokens(getenv("N8N_GUARD_TOKENS"))); n > 1 {
			fmt.Fprintf(w, "WARNING: N8N_GUARD_TOKENS holds %d tokens and N8N_GUARD_TOKEN is not set: n8n's credential gets the first; set N8N_GUARD_TOKEN to the one n8n should hold\n", n)
		}
	}
	return tok, nil
}

// setupSecret is one of the guard's shared secrets (resume, check),
// found the way the guard finds it: its variable, else the guards'
// database when store is a PostgreSQL URL, else its file in the data
// folder. None yet (a guard never started) is not an error here: setup
// says NOT DONE only when a workflow needs the credential.
func setupSecret(ctx context.Context, getenv func(string) string, data, store string, s sharedSecret) (string, error) {
	if v := strings.TrimSpace(getenv(s.Env)); v != "" {
		return v, nil
	}
	if isPostgresURL(store) {
		v, _, err := postgres.ReadSharedSecret(ctx, store, s.Name)
		if err != nil {
			return "", fmt.Errorf("--create-credential: the guards' %s cannot be read from their database (%w): set %s", s.Name, err, s.Env)
		}
		return string(v), nil
	}
	b, err := os.ReadFile(filepath.Join(data, s.Name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("--create-credential: the guard's %s cannot be read (%w): set %s", s.Name, err, s.Env)
	}
	return strings.TrimSpace(string(b)), nil
}

// setupSecretOrWarn is setupSecret, or none with a WARNING on w naming
// the secret, why it could not be read and the variable that gives it.
func setupSecretOrWarn(ctx context.Context, w io.Writer, getenv func(string) string, data, store string, s sharedSecret) string {
	v, err := setupSecret(ctx, getenv, data, store, s)
	if err != nil {
		// err names the secret, the cause and the variable to set.
		fmt.Fprintf(w, "WARNING: %v; setup goes on without the guard's %s (its credential is not created)\n", err, s.Name)
		return ""
	}
	return v
}

func newN8NCheckCmd(f *n8nFlags, getenv func(string) string) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "List the workflows whose failures nobody would hear of; exit 1 if any",
		Long: `List the workflows that would fail silently today: no error workflow, an
error workflow that does not exist or (2.x) is not published, or one whose
credential is missing; parking workflows whose Wait nodes, and checks whose
webhooks, would refuse the guard's calls. Exits non-zero when any does, for
use in CI. It also warns when the guard would refuse n8n's resume URLs (their
origin, n8n's WEBHOOK_URL: --webhook-url, default --n8n-url, is not one of
N8N_GUARD_RESUME_ORIGINS / the --config file's n8n.resume_origins / N8N_URL's),
and when n8n's SSRF protection (N8N_SSRF_PROTECTION_ENABLED, which n8n does not
tell an API key about) would refuse the guard's address in the workflows'
Config nodes (localhost, private networks); a recent failed execution with
n8n's SSRF refusal of that address makes the workflow SILENT. A workflow that
holds a guarded write and is off (not published; 1.x: not active) although it
ran on its triggers before is SILENT too: n8n turns a workflow off after
repeated crashed executions without calling its error workflow.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, err := f.connect(cmd)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if err := f.printResumeOrigin(out, getenv, inst); err != nil {
				return err
			}
			rep, err := inst.Check(cmd.Context(), f.scope())
			printReport(out, rep)
			if err != nil {
				return err
			}
			silent := rep.Silent
			for _, s := range silent {
				fmt.Fprintf(out, "  SILENT %s %q: %s\n", s.ID, s.Name, s.Why)
			}
			if len(silent) > 0 {
				return fmt.Errorf("%d workflow(s) would fail silently; `n8n-guard n8n setup` fixes the missing error workflows", len(silent))
			}
			fmt.Fprintln(out, "every workflow in scope reports its failures")
			return nil
		},
	}
}
