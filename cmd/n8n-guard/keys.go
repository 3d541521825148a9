package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

func newKeysCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Inspect and resolve keys of a running n8n-guard",
	}
	o.addFlags(cmd)
	cmd.AddCommand(newKeysListCmd(o), newKeysShowCmd(o), newKeysResolveCmd(o), newKeysApproveCmd(o, false), newKeysApproveCmd(o, true))
	return cmd
}

func newKeysListCmd(o *clientOptions) *cobra.Command {
	var (
		namespace, state string
		limit            int
		all, asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List keys, e.g. the queue of unknown keys a person must resolve",
		Example: `  n8n-guard keys list --state unknown
  n8n-guard keys list --namespace crm-contacts --state failed --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			var items []*keystore.Record
			cursor := ""
			for {
				page, err := c.Keys(cmd.Context(), client.KeyQuery{Namespace: namespace, State: keystore.State(state), Limit: limit, Cursor: cursor})
				if err != nil {
					return err
				}
				items = append(items, page.Items...)
				cursor = page.NextCursor
				if !all || cursor == "" {
					break
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"items": items, "next_cursor": cursor})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAMESPACE\tKEY\tSTATE\tATTEMPT\tOWNER\tUPDATED\tREASON")
			for _, r := range items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Namespace, r.Key, r.State, r.Attempt,
					r.Owner, r.UpdatedAt.UTC().Format(time.RFC3339), r.Reason)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if cursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more keys: --all, or --limit larger than %d\n", limit)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&namespace, "namespace", "", "only this namespace")
	fs.StringVar(&state, "state", "", "only this state: reserved, completed, failed or unknown")
	fs.IntVar(&limit, "limit", 100, "keys per page (at most 1000)")
	fs.BoolVar(&all, "all", false, "follow next_cursor through every page")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func newKeysShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAMESPACE KEY",
		Short: "Show a key's record and history",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			rec, err := c.Lookup(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, rec, "", "  "); err != nil {
				return err
			}
			buf.WriteByte('\n')
			_, err = buf.WriteTo(cmd.OutOrStdout())
			return err
		},
	}
}

func newKeysResolveCmd(o *clientOptions) *cobra.Command {
	var (
		completed, failed, force bool
		by, note, resultRef      string
	)
	cmd := &cobra.Command{
		Use:   "resolve NAMESPACE KEY (--completed | --failed) --note TEXT [--by NAME]",
		Short: "Record a person's decision about a key (usually one in state unknown)",
		Long: `Record a person's decision about a key.

--completed: the side effect did take effect; the key is done and later
reserves answer duplicate_event.
--failed: it did not take effect; the next reserve may try again.

Who decides: --by, else $N8N_GUARD_PERSON, else your OS user name. A
token that names its person (tokens.<name>.person) decides as that
person; a shared token's decision is recorded as "<by> (via shared
token <name>)". The answer says who was recorded.`,
		Example: `  n8n-guard keys resolve booking-confirmations B-1042 --completed \
    --by "office manager" --note "checked the Sent folder: mail went out"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			resolution := keystore.StateCompleted
			if failed {
				resolution = keystore.StateFailed
			}
			a, err := decide(o.decider(by), func(by string) (api.Answer, error) {
				return c.Resolve(cmd.Context(), client.Resolution{
					Namespace: args[0], Key: args[1], Resolution: resolution,
					By: by, Note: note, ResultRef: resultRef, Force: force,
				})
			})
			if err != nil {
				var e *client.Error
				if errors.As(err, &e) && e.Code() == string(errs.Conflict) && !force && strings.Contains(e.Problem.Detail, "reserved by a live attempt") {
					return fmt.Errorf("%w\n(a live reservation is only overridden with --force)", err)
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: %s (state %s, attempt %d", args[0], args[1], a.Outcome, a.State, a.Attempt)
			if a.State == keystore.StateFailed && a.Retryable {
				fmt.Fprint(cmd.OutOrStdout(), ", the next reserve may try again")
			}
			fmt.Fprintln(cmd.OutOrStdout(), ")")
			fmt.Fprintf(cmd.OutOrStdout(), "recorded as decided by %s\n", a.ResolvedBy)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&completed, "completed", false, "the side effect took effect")
	fs.BoolVar(&failed, "failed", false, "the side effect did not take effect; allow a new attempt")
	fs.StringVar(&by, "by", "", "who decided (default $N8N_GUARD_PERSON, else your OS user; a named token decides as its person)")
	fs.StringVar(&note, "note", "", "what was checked and decided (required)")
	fs.StringVar(&resultRef, "result-ref", "", "reference of the result, e.g. the ID the target system gave (with --completed)")
	fs.BoolVar(&force, "force", false, "also resolve a key whose reservation is still live")
	cmd.MarkFlagsMutuallyExclusive("completed", "failed")
	cmd.MarkFlagsOneRequired("completed", "failed")
	_ = cmd.MarkFlagRequired("note")
	return cmd
}

// newKeysApproveCmd is keys approve, or keys reject: a person's decision
// on a key that awaits approval.
func newKeysApproveCmd(o *clientOptions, reject bool) *cobra.Command {
	var by, note string
	verb, noteHelp := "approve", "why (optional)"
	if reject {
		verb, noteHelp = "reject", "why it is rejected (required: it becomes the key's message)"
	}
	cmd := &cobra.Command{
		Use:     verb + " NAMESPACE KEY [--note TEXT] [--by NAME]",
		Short:   "A person's decision to " + verb + " a key that awaits approval (who decides: as keys resolve)",
		Example: "  n8n-guard keys " + verb + " invoices INV-1042 --note \"amount checked\"",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			a, err := decide(o.decider(by), func(by string) (api.Answer, error) {
				return c.Approve(cmd.Context(), client.Approval{Namespace: args[0], Key: args[1], By: by, Note: note}, reject)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: %s (reason %s); recorded as decided by %s\n", args[0], args[1], a.Outcome, a.Reason, a.ResolvedBy)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who decides (default $N8N_GUARD_PERSON, else your OS user; a named token decides as its person)")
	cmd.Flags().StringVar(&note, "note", "", noteHelp)
	if reject {
		_ = cmd.MarkFlagRequired("note")
	}
	return cmd
}
