package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/keystore"
)

func newDestinationsCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "destinations",
		Short: "Show destinations, reset a breaker, hold one for a maintenance window, list parked events",
	}
	o.addFlags(cmd)
	cmd.AddCommand(newDestinationsListCmd(o), newDestinationsResetCmd(o), newDestinationsHoldCmd(o), newDestinationsEndHoldCmd(o), newDestinationsParkedCmd(o))
	return cmd
}

func newDestinationsListCmd(o *clientOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every destination's breaker, parked events and maintenance window",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			items, err := c.Destinations(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"items": items})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "DESTINATION\tSTATE\tPARKED\tPROBES AGAIN\tMAINTENANCE\tRESET")
			for _, d := range items {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", d.Destination, d.State, d.Parked, timeOrDash(d.ReopensAt), windowText(d.Maintenance), resetText(d.Reset))
				// A namespace paused by its own failures alone: one line
				// each under its destination, which stays closed for the rest.
				for _, v := range d.Views {
					fmt.Fprintf(tw, "  namespace %s\t%s for it alone\t-\t%s\t-\t-\n", v.Namespace, v.State, timeOrDash(v.ReopensAt))
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// windowText is a maintenance window in one line, or "-".
func windowText(m *keystore.Maintenance) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprintf("until %s by %s: %s", m.Until.UTC().Format(time.RFC3339), m.By, m.Reason)
}

// resetText is a person's reset of a breaker in one line, or "-".
func resetText(r *keystore.BreakerReset) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("by %s because %s, %s", r.By, oneLine(r.Reason), r.At.UTC().Format(time.RFC3339))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func newDestinationsResetCmd(o *clientOptions) *cobra.Command {
	var by, reason string
	cmd := &cobra.Command{
		Use:   "reset DESTINATION --reason TEXT [--by NAME]",
		Short: "Close a destination's breaker now, for a reason: writes are let through although no probe showed it back",
		Long: `Close a destination's breaker now: the next reserve naming it goes
through and parked events are caught up, although no probe has shown the
destination takes writes. The reason is kept on the breaker and shown in
the console, the audit list and the outage's Slack message.

Who resets: --by, else $N8N_GUARD_PERSON, else your OS user name (a
token that names its person resets as that person).`,
		Example: `  n8n-guard destinations reset hubspot --reason "CRM confirmed fixed, ticket OPS-12"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			b, err := decide(o.decider(by), func(by string) (keystore.Breaker, error) {
				return c.ResetBreaker(cmd.Context(), args[0], by, reason)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "the breaker of %s is %s: writes are let through again, though no probe has shown it takes them\n", b.Destination, b.State)
			if b.Reset != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "recorded as reset by %s because %s\n", b.Reset.By, oneLine(b.Reset.Reason))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who resets (default $N8N_GUARD_PERSON, else your OS user; a named token resets as its person)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the breaker may close (required)")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func newDestinationsHoldCmd(o *clientOptions) *cobra.Command {
	var (
		by, reason, until string
		window            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "hold DESTINATION (--for DURATION | --until TIME) --reason TEXT [--by NAME]",
		Short: "Pause a destination for a maintenance window: events with a resume URL park and catch up after it",
		Example: `  n8n-guard destinations hold hubspot --for 2h --by ops --reason "HubSpot upgrade, ticket OPS-12"
  n8n-guard destinations hold hubspot --until 2026-12-02T03:00:00Z --by ops --reason "planned maintenance"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h := client.Hold{Destination: args[0], Reason: reason}
			switch {
			case (window > 0) == (until != ""):
				return errors.New("give the window's end with exactly one of --for (e.g. 2h) and --until (RFC 3339, e.g. 2026-12-02T03:00:00Z)")
			case window > 0:
				h.Until = time.Now().Add(window)
			default:
				t, err := time.Parse(time.RFC3339, until)
				if err != nil {
					return fmt.Errorf("--until %q: want RFC 3339, e.g. 2026-12-02T03:00:00Z", until)
				}
				h.Until = t
			}
			c, err := o.authed()
			if err != nil {
				return err
			}
			b, err := decide(o.decider(by), func(by string) (keystore.Breaker, error) {
				h.By = by
				return c.HoldDestination(cmd.Context(), h)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is paused until %s: events with a resume URL park and are caught up after the window\n",
				b.Destination, timeOrDash(b.ReopensAt))
			if b.Maintenance != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "recorded as set by %s\n", b.Maintenance.By)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&window, "for", 0, "how long the window lasts from now (e.g. 90m, 2h)")
	fs.StringVar(&until, "until", "", "when the window ends (RFC 3339)")
	fs.StringVar(&by, "by", "", "who sets the window (default $N8N_GUARD_PERSON, else your OS user; a named token sets it as its person)")
	fs.StringVar(&reason, "reason", "", "why the destination is paused (required)")
	return cmd
}

func newDestinationsEndHoldCmd(o *clientOptions) *cobra.Command {
	var by, reason string
	cmd := &cobra.Command{
		Use:     "end-hold DESTINATION --reason TEXT [--by NAME]",
		Short:   "End a destination's maintenance window now: one parked event probes it, the rest follow",
		Example: `  n8n-guard destinations end-hold hubspot --by ops --reason "the upgrade finished early"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			b, err := decide(o.decider(by), func(by string) (keystore.Breaker, error) {
				return c.EndHold(cmd.Context(), args[0], by, reason)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "the maintenance window of %s has ended: %s, the catch-up probes it with one parked event\n", b.Destination, b.State)
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", "", "who ends the window (default $N8N_GUARD_PERSON, else your OS user)")
	cmd.Flags().StringVar(&reason, "reason", "", "why it ends early (required)")
	return cmd
}

func newDestinationsParkedCmd(o *clientOptions) *cobra.Command {
	var (
		namespace string
		overdue   time.Duration
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "parked [DESTINATION]",
		Short: "List parked events (all, or one destination's), marking the lost and the overdue ones",
		Example: `  n8n-guard destinations parked hubspot
  n8n-guard destinations parked --namespace crm-contacts --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dest := ""
			if len(args) == 1 {
				dest = args[0]
			}
			c, err := o.authed()
			if err != nil {
				return err
			}
			var items []*keystore.Record
			for cursor := ""; ; {
				page, err := c.Keys(cmd.Context(), client.KeyQuery{Namespace: namespace, State: keystore.StateParked, Limit: 1000, Cursor: cursor})
				if err != nil {
					return err
				}
				for _, r := range page.Items {
					if dest == "" || r.Destination == dest {
						items = append(items, r)
					}
				}
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"items": items})
			}
			now := time.Now()
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAMESPACE\tKEY\tDESTINATION\tPARKED\tSTATUS\tRESUME URL")
			// Those a person must act on, by stage, with the next step
			// in keystore's words (the console's).
			attention := map[string]int{}
			next := map[string]string{}
			var order []string
			for _, r := range items {
				w := keystore.WordsOf(r, keystore.WordsAt{ParkedLimit: overdue, Now: now})
				status := parkedStatus(w)
				if w.Attention {
					if attention[status] == 0 {
						order = append(order, status)
						next[status] = w.Next
					}
					attention[status]++
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Key, r.Destination, timeOrDash(r.WaitingSince()), status, r.ResumeURL)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, status := range order {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d %s: %s %s\n", attention[status], status, next[status], parkedDoor(status, overdue))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&namespace, "namespace", "", "only this namespace")
	fs.DurationVar(&overdue, "overdue-after", keystore.DefaultParkedLimit, "mark events parked longer than this OVERDUE (the namespaces' parked_limit)")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// parkedStatus is a parked event's stage as the listing's column reads
// it: WAITING, CLAIMED, PROBE, RESUMED, OVERDUE, LOST, AWAITING_APPROVAL,
// APPROVED or REJECTED (keystore.WordsOf).
func parkedStatus(w keystore.KeyWords) string {
	return strings.ToUpper(w.Stage)
}

// parkedDoor is how a person takes the next step from the CLI.
func parkedDoor(status string, overdue time.Duration) string {
	switch status {
	case "LOST":
		return "(decide with `n8n-guard keys resolve`)"
	case "OVERDUE":
		return fmt.Sprintf("(parked longer than %s: see `n8n-guard destinations list`)", overdue)
	case "AWAITING_APPROVAL":
		return "(`n8n-guard keys approve` or `n8n-guard keys reject`)"
	}
	return ""
}
