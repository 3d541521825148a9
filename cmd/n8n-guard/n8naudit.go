package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/n8nsetup"
)

func newN8NAuditCmd(f *n8nFlags) *cobra.Command {
	var asJSON, acceptUnclassified bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List every node that writes to another system and whether n8n-guard guards it; exit 1 if one is unguarded",
		Long: `Read every workflow (or those with --tag / --project) through n8n's public
API and list, per workflow, each node that writes to another system (an HTTP
Request other than GET/HEAD/OPTIONS, an app node whose operation is not a
read) and each node the audit does not know ("unclassified": check it by
hand), with whether n8n-guard guards it: a reserve on every path from the
trigger to it whose proceed answer alone leads to it, a complete after it,
its failure failed with a reason, a stable key, and n8n-guard's error
workflow. On n8n 2.x a workflow with unpublished edits is read twice: the
published version and the draft.

Each unguarded node comes with its fix: an "n8n-guard n8n guard" command
line, or the change to make by hand. Exits 1 while any node is unguarded,
for use in a workflow-review pipeline (--accept-unclassified: not for the
nodes it does not know, once a person checked them); --json prints the findings for
scripts (the connection line goes to stderr).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			say := out
			if asJSON {
				say = cmd.ErrOrStderr()
			}
			inst, err := f.connectSaying(cmd, say)
			if err != nil {
				return err
			}
			a, err := inst.Audit(cmd.Context(), f.scope())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(a); err != nil {
					return err
				}
			} else {
				printAudit(out, a)
			}
			if n := a.Unguarded(acceptUnclassified); n > 0 {
				return fmt.Errorf("%d node(s) write without n8n-guard (or are unclassified)", n)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the findings as JSON")
	cmd.Flags().BoolVar(&acceptUnclassified, "accept-unclassified", false, "list the nodes the audit does not know but do not fail on them (once a person checked that they do not write)")
	return cmd
}

// printAudit prints one table row per finding and, below it, the fix of
// each unguarded one.
func printAudit(w io.Writer, a *n8nsetup.Audit) {
	for _, note := range a.Notes {
		fmt.Fprintf(w, "  note: %s\n", note)
	}
	if len(a.Findings) == 0 {
		fmt.Fprintf(w, "%d workflow(s) read: no node writes to another system\n", a.Workflows)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tVERSION\tNODE\tTYPE\tEFFECT\tOPERATION\tGUARDED")
	for _, f := range a.Findings {
		guarded := "yes"
		if !f.Guarded {
			guarded = "NO"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.WorkflowID, f.Workflow, dash(f.Version), f.Node,
			strings.TrimPrefix(f.Type, "n8n-nodes-base."), f.Effect, dash(f.Operation), guarded)
	}
	tw.Flush()
	for _, f := range a.Findings {
		if f.Guarded {
			continue
		}
		fmt.Fprintf(w, "\n%s %q, node %q%s:\n", f.WorkflowID, f.Workflow, f.Node, inVersion(f.Version))
		if f.Why != "" {
			fmt.Fprintf(w, "  - %s\n", f.Why)
		}
		for _, p := range f.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
		fmt.Fprintf(w, "  fix: %s\n", f.Fix)
	}
	fmt.Fprintf(w, "\n%d workflow(s) read, %d node(s) listed, %d unguarded\n", a.Workflows, len(a.Findings), a.Unguarded(false))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func inVersion(v string) string {
	if v == "" {
		return ""
	}
	return " (" + v + " version)"
}
