package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/n8n"
)

// n8nFlags are the flags of `n8n-guard n8n ...`, which talk to n8n's public
// API, not to the guard.
type n8nFlags struct {
	n8nURL, apiKey string
	tag, project   string
	timeout        time.Duration
}

func (f *n8nFlags) add(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.n8nURL, "n8n-url", "http://localhost:5678", "base URL of n8n")
	fs.StringVar(&f.apiKey, "api-key", "", "n8n API key (n8n: Settings → n8n API)")
	fs.StringVar(&f.tag, "tag", "", "only workflows with this tag")
	fs.StringVar(&f.project, "project", "", "only workflows of this project (its id)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "timeout of each call to n8n")
	bindEnv(fs, "n8n-url", "N8N_URL")
	bindEnv(fs, "api-key", "N8N_API_KEY")
}

// connect finds out which n8n answers and refuses one it cannot serve.
func (f *n8nFlags) connect(cmd *cobra.Command) (*n8n.Instance, error) {
	return f.connectSaying(cmd, cmd.OutOrStdout())
}

// connectSaying connects and says which n8n answered on w (stderr where
// stdout is for scripts).
func (f *n8nFlags) connectSaying(cmd *cobra.Command, w io.Writer) (*n8n.Instance, error) {
	if f.apiKey == "" {
		return nil, errors.New("no n8n API key: set N8N_API_KEY or --api-key (n8n: Settings → n8n API)")
	}
	inst, err := n8n.Connect(cmd.Context(), n8n.New(f.n8nURL, f.apiKey, f.timeout))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "n8n %s at %s\n", inst.Version, inst.Client.Base())
	return inst, nil
}

func (f *n8nFlags) scope() n8n.Filter {
	return n8n.Filter{Tag: f.tag, ProjectID: f.project}
}

// printReport prints what setup or check did, line by line.
func printReport(w io.Writer, rep *n8n.Report) {
	for _, s := range rep.Steps {
		switch s.Kind {
		case n8n.Change:
			verb := ""
			if rep.DryRun {
				verb = "would "
			}
			fmt.Fprintf(w, "  %s%s\n", verb, s.Text)
		case n8n.NotDone:
			fmt.Fprintf(w, "  NOT DONE: %s\n", s.Text)
		case n8n.Note:
			fmt.Fprintf(w, "  note: %s\n", s.Text)
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
	cmd.AddCommand(newN8NSetupCmd(&f, getenv), newN8NCheckCmd(&f), newN8NAuditCmd(&f), newN8NGuardCmd(&f))
	return cmd
}

func newN8NSetupCmd(f *n8nFlags, getenv func(string) string) *cobra.Command {
	var (
		o          n8n.SetupOptions
		createCred bool
		data       string
	)
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Install the error handler (published on 2.x) and make it every workflow's error workflow",
		Long: `Install n8n-guard's error handler and make it the error workflow of every
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
--create-credential creates it from N8N_GUARD_RESUME_SECRET or
<data>/resume-secret, and setup wires every such Wait node to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if createCred {
				tok, err := setupToken(getenv, data)
				if err != nil {
					return err
				}
				o.Token = tok
				if o.ResumeSecret, err = setupResumeSecret(getenv, data); err != nil {
					return err
				}
			}
			inst, err := f.connect(cmd)
			if err != nil {
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
	fs.BoolVar(&createCred, "create-credential", false, "create the n8n credentials \"n8n-guard API token\" and (for parking workflows) \"n8n-guard resume\" if they are missing")
	fs.StringVar(&data, "data", DefaultDataDir, "data folder whose api-token and resume-secret are used when N8N_GUARD_TOKEN / N8N_GUARD_RESUME_SECRET are not set")
	fs.BoolVar(&o.Examples, "examples", false, "also install the example workflows (lead to CRM, booking confirmation), unpublished")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print what would change and change nothing")
	bindEnv(fs, "guard-url", "N8N_GUARD_URL")
	bindEnv(fs, "data", "N8N_GUARD_DATA")
	return cmd
}

// setupToken is the guard token the credential gets, found the way the
// operator commands find theirs.
func setupToken(getenv func(string) string, data string) (string, error) {
	tok, err := guardToken(getenv, data)
	if err != nil {
		return "", fmt.Errorf("--create-credential needs the guard's token: set N8N_GUARD_TOKEN or point --data at the guard's data folder (%w)", err)
	}
	return tok, nil
}

// setupResumeSecret is the guard's resume secret, found the way the guard
// finds it: N8N_GUARD_RESUME_SECRET, else <data>/resume-secret. None yet
// (a guard never started) is not an error here: setup says NOT DONE only
// when a workflow needs the credential.
func setupResumeSecret(getenv func(string) string, data string) (string, error) {
	if s := strings.TrimSpace(getenv("N8N_GUARD_RESUME_SECRET")); s != "" {
		return s, nil
	}
	b, err := os.ReadFile(filepath.Join(data, n8n.ResumeSecretFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("--create-credential: the guard's resume secret cannot be read (%w): set N8N_GUARD_RESUME_SECRET", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func newN8NCheckCmd(f *n8nFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "List the workflows whose failures nobody would hear of; exit 1 if any",
		Long: `List the workflows that would fail silently today: no error workflow, an
error workflow that does not exist or (2.x) is not published, or one whose
credential is missing. Exits non-zero when any does, for use in CI.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inst, err := f.connect(cmd)
			if err != nil {
				return err
			}
			rep, err := inst.Check(cmd.Context(), f.scope())
			out := cmd.OutOrStdout()
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
