package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/api/wire"
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
	cmd.AddCommand(newKeysListCmd(o), newKeysShowCmd(o), newKeysResolveCmd(o), newKeysResolveBulkCmd(o), newKeysApproveCmd(o, false), newKeysApproveCmd(o, true))
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
			fmt.Fprintln(tw, "NAMESPACE\tKEY\tSTATE\tATTEMPT\tHOLDER\tUPDATED\tREASON")
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
			if _, err = buf.WriteTo(cmd.OutOrStdout()); err != nil {
				return err
			}
			// The record stays JSON on stdout (scripts read it); a person
			// reads where it stands on stderr, in keystore's words.
			var r keystore.Record
			if err := json.Unmarshal(rec, &r); err != nil || r.State == "" || r.State == keystore.StateAbsent {
				return nil
			}
			_, err = io.WriteString(cmd.ErrOrStderr(), wordsText(keystore.WordsOf(&r, keystore.WordsAt{Now: time.Now()})))
			return err
		},
	}
}

// wordsText is a key's words as the CLI prints them, one line each:
// status, reason, next step.
func wordsText(w keystore.KeyWords) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s\n", w.Status)
	if w.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", w.Reason)
	}
	if w.Next != "" {
		fmt.Fprintf(&b, "next step: %s\n", w.Next)
	}
	return b.String()
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
			a, err := decide(o.decider(by), func(by string) (wire.Answer, error) {
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
				if errors.As(err, &e) && e.Code() == string(errs.ParkedWaiting) && !force {
					return fmt.Errorf("%w\n(--force decides it anyway; then stop the execution in n8n)", err)
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
	fs.BoolVar(&force, "force", false, "also resolve a key whose reservation is still live, or a parked key whose n8n execution still waits for the guard's resume call (that execution stays in its Wait node: stop it in n8n)")
	cmd.MarkFlagsMutuallyExclusive("completed", "failed")
	cmd.MarkFlagsOneRequired("completed", "failed")
	_ = cmd.MarkFlagRequired("note")
	return cmd
}

// bulkTimeout bounds the decision of a bulk (a hundred thousand keys take
// about half a minute), unless --timeout is longer.
const bulkTimeout = 30 * time.Minute

// bulkFlags are the flags of keys resolve-bulk: the filter, the decision
// and how to confirm it.
type bulkFlags struct {
	namespace, destination, reason, holder, keyPrefix, text, from, to string
	states                                                            []string
	resolution, by, note, resultRef                                   string
	final, dryRun, yes                                                bool
}

func newKeysResolveBulkCmd(o *clientOptions) *cobra.Command {
	var f bulkFlags
	cmd := &cobra.Command{
		Use:   "resolve-bulk --resolution failed|completed --by NAME --note TEXT [filter flags] [--dry-run] [--yes]",
		Short: "Decide every key a filter selects at once, with one reason (e.g. the unknown keys of an incident)",
		Long: `Decide every key a filter selects at once, with one reason; each key's
history names the bulk action and the person. Needs a token with the decide
(or admin) role; a token limited to namespaces must name one with
--namespace. A selection is required (--namespace, --state, --destination,
...): a bulk decision never takes every key.

Without --yes it first counts (a dry run), prints the count and asks for
confirmation on the terminal; without a terminal it refuses (count with
--dry-run, decide with --yes). Keys a resolution does not apply to (a live
lease, awaiting approval, completed) are left as they are and counted.

--resolution failed: the side effects did not take effect; the next reserve
may try again (--final: no new attempt). --resolution completed: they did.`,
		Example: `  n8n-guard keys resolve-bulk --namespace crm-contacts --state unknown --destination hubspot \
    --resolution failed --by ann --note "CRM incident 4711: retry after the fix"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, words, err := f.decision()
			if err != nil {
				return err
			}
			c, err := o.authed()
			if err != nil {
				return err
			}
			if !f.yes || f.dryRun {
				if done, err := f.confirm(cmd, c, &d, words); done || err != nil {
					return err
				}
			}
			return decideBulk(cmd, o, d, words)
		},
	}
	f.add(cmd)
	return cmd
}

func (f *bulkFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.namespace, "namespace", "", "only this namespace (required for a token limited to namespaces)")
	fs.StringArrayVar(&f.states, "state", nil, "only keys in this state (repeat for several): reserved, completed, failed, unknown, parked")
	fs.StringVar(&f.destination, "destination", "", "only keys of this destination")
	fs.StringVar(&f.reason, "reason", "", "only keys with this reason, e.g. outcome_unknown")
	fs.StringVar(&f.holder, "holder", "", "only keys whose lease holder (the n8n execution) contains this, any case")
	fs.StringVar(&f.keyPrefix, "key-prefix", "", "only keys that begin with this")
	fs.StringVar(&f.text, "text", "", "only keys that contain this, any case")
	fs.StringVar(&f.from, "from", "", "only keys changed at or after this time (2026-12-01T14:30, local time, or RFC 3339)")
	fs.StringVar(&f.to, "to", "", "only keys changed before this time")
	fs.StringVar(&f.resolution, "resolution", "", "failed (did not take effect) or completed (took effect)")
	fs.BoolVar(&f.final, "final", false, "with --resolution failed: no new attempt")
	fs.StringVar(&f.by, "by", "", "who decides (required)")
	fs.StringVar(&f.note, "note", "", "what was checked and decided (required)")
	fs.StringVar(&f.resultRef, "result-ref", "", "reference of the result (with --resolution completed)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "only count: nothing is decided")
	fs.BoolVar(&f.yes, "yes", false, "decide without asking")
	_ = cmd.MarkFlagRequired("resolution")
	_ = cmd.MarkFlagRequired("by")
	_ = cmd.MarkFlagRequired("note")
}

// decision is the bulk decision the flags ask for, and the words that
// say it to a person.
func (f *bulkFlags) decision() (client.BulkDecision, string, error) {
	q := url.Values{"namespace": {f.namespace}, "destination": {f.destination}, "state": f.states, "reason": {f.reason},
		"holder": {f.holder}, "key_prefix": {f.keyPrefix}, "text": {f.text}, "from": {f.from}, "to": {f.to}}
	filter, err := keystore.FilterFromQuery(q, time.Local)
	if err != nil {
		return client.BulkDecision{}, "", err
	}
	d := client.BulkDecision{Filter: filter, Resolution: keystore.State(f.resolution), By: f.by, Note: f.note, ResultRef: f.resultRef, Final: f.final}
	words := map[keystore.State]string{keystore.StateFailed: "failed (retryable: a new attempt may start)", keystore.StateCompleted: "completed"}[d.Resolution]
	if words == "" {
		return d, "", fmt.Errorf("--resolution is failed or completed, not %q", f.resolution)
	}
	if f.final {
		words = "failed for good (no new attempt)"
	}
	return d, words, nil
}

// confirm counts first (a dry run) and, unless --dry-run, asks on the
// terminal; done is true when nothing is to be decided. A confirmed d
// carries the count's id: a repeat decides nothing twice.
func (f *bulkFlags) confirm(cmd *cobra.Command, c *client.Client, d *client.BulkDecision, words string) (done bool, err error) {
	out := cmd.OutOrStdout()
	d.DryRun = true
	count, err := c.ResolveBulk(cmd.Context(), *d)
	if err != nil {
		return true, err
	}
	fmt.Fprintf(out, "%d keys match; %d would be decided as %s%s\n", count.Matched, count.Decided, words, skippedText(count.Skipped))
	if f.dryRun || count.Decided == 0 {
		return true, nil
	}
	if !isTerminal(cmd.InOrStdin()) {
		return true, fmt.Errorf("not deciding %d keys without a confirmation: stdin is not a terminal; run again with --yes to decide them", count.Decided)
	}
	fmt.Fprintf(out, "Decide %d keys as %s? Type yes to go on: ", count.Decided, words)
	answer, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "yes" && a != "y" {
		return true, errors.New("nothing decided")
	}
	d.ID, d.DryRun = count.ID, false
	return false, nil
}

// decideBulk decides d, with a client that waits as long as a bulk
// decision may take.
func decideBulk(cmd *cobra.Command, o *clientOptions, d client.BulkDecision, words string) error {
	tok, err := guardToken(o.getenv, o.data)
	if err != nil {
		return err
	}
	long := client.New(o.url, client.Options{Token: tok, Timeout: max(o.timeout, bulkTimeout)})
	res, err := long.ResolveBulk(cmd.Context(), d)
	if err != nil {
		if d.ID != "" {
			return fmt.Errorf("%w\n(the same command with --yes finishes what is left; bulk %s decides nothing twice)", err, d.ID)
		}
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "decided %d keys as %s (bulk %s)%s\n", res.Decided, words, res.ID, skippedText(res.Skipped))
	return nil
}

// skippedText lists why keys were left alone, by code and in the words
// the console uses: "; left alone: 5 live_lease (an attempt holds a live
// lease)".
func skippedText(skipped map[string]int) string {
	if len(skipped) == 0 {
		return ""
	}
	var parts []string
	for why, n := range skipped {
		parts = append(parts, fmt.Sprintf("%d %s (%s)", n, why, keystore.SkipWords(why)))
	}
	sort.Strings(parts)
	return "; left alone: " + strings.Join(parts, ", ")
}

// isTerminal says whether r is a terminal a person types into (a test
// stands in for one with a reader that says so).
func isTerminal(r io.Reader) bool {
	if t, ok := r.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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
			a, err := decide(o.decider(by), func(by string) (wire.Answer, error) {
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
