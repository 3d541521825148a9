package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newNotificationsCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notifications",
		Short: "List the notification outbox of a running n8n-guard and re-send dead notifications",
	}
	o.addFlags(cmd)
	cmd.AddCommand(newNotificationsListCmd(o), newNotificationsResendCmd(o))
	return cmd
}

func newNotificationsListCmd(o *clientOptions) *cobra.Command {
	var (
		state  string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List notifications, newest first; --state dead lists those Slack refused for good",
		Example: `  n8n-guard notifications list --state dead`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			page, err := c.Notifications(cmd.Context(), state, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(page)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tKIND\tCHANNEL\tOWNER\tATTEMPTS\tCREATED\tLAST FAILURE")
			for _, n := range page.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", n.ID, n.Status, n.Kind, n.Channel, n.Owner,
					n.Attempts, n.CreatedAt.UTC().Format(time.RFC3339), n.LastFailure)
			}
			return tw.Flush()
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&state, "state", "", "only this status: pending, delivered or dead")
	fs.IntVar(&limit, "limit", 50, "notifications to list (at most 500)")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func newNotificationsResendCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "resend ID",
		Short: "Queue a dead notification again, after its cause (channel, token, scope) was fixed",
		Example: `  n8n-guard notifications list --state dead
  n8n-guard notifications resend n_18ecca50d8f340006510bb76`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			n, err := c.Resend(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s again; it is sent on the next worker pass\n", n.ID, n.Status)
			return nil
		},
	}
}
