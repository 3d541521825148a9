package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/n8n"
)

func newN8NGuardCmd(f *n8nFlags, getenv func(string) string) *cobra.Command {
	var (
		o           n8n.GuardOptions
		data, store string
	)
	cmd := &cobra.Command{
		Use:   "guard --workflow <id> --node <name> --key <expression>",
		Short: "Put n8n-guard in front of one node that writes: reserve, complete, fail (and park)",
		Long: `Rewrite one workflow through n8n's public API so that the node that writes
is guarded, with the shipped HTTP-node templates: a reserve in front of it
(its key: --key, the event's own id as an expression on the item the node
gets, e.g. '$json.body.event_id'), an If that lets only "proceed" through,
the node's own item handed on to it, a complete after it, its error output
classified by the templates' rules (4xx validation_failed; 408, 429 and
other 5xx destination_failed; 502, 504, timeouts outcome_unknown; refused
connections destination_unreachable) and failed, then the execution
stopped so its owner hears of it. A webhook that answers through Respond to
Webhook answers a copy of the event with its code (duplicate_event 200,
in_progress 409, …). The workflow gets n8n-guard's error workflow.

Defaults: --namespace is the workflow's and the node's name in lower case
([a-z0-9._-], 64 characters at most); --destination is the host the node
writes to (a fixed URL), else its node type; parking is off (--park: while
the destination is paused the execution waits in a Wait node until the
guard resumes it; needs the credential "n8n-guard resume", which setup
--create-credential makes, or guard makes from the guard's resume secret:
N8N_GUARD_RESUME_SECRET, --store or --data; and a guard that knows n8n's
address). After the catch-up every item that reached the node is reserved
again: several items of one execution park behind one Wait node, and the
ones written already answer duplicate_event. --guard-url defaults to the address in the
installed error handler (setup's --guard-url).

Idempotent: a guarded node is left as it is. Nothing is unpublished: on 2.x
a published workflow without unpublished edits goes live with the change;
one with unpublished edits is saved as a draft, and the command says so.
Refused, with the reason and the recipe by hand: several inputs into the
node, a loop back into it, a node in a sub-workflow (Execute Workflow
Trigger), a node that handles its own failures (On Error set).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Spec.Park {
				// Found in n8n when it can be; made from the guard's secret
				// when not (1.x cannot list credentials).
				o.ResumeSecret = setupSecretOrWarn(cmd.Context(), cmd.OutOrStdout(), getenv, data, store, resumeSecretSpec)
			}
			inst, err := f.connect(cmd)
			if err != nil {
				return err
			}
			rep, err := inst.Guard(cmd.Context(), o)
			printReport(cmd.OutOrStdout(), rep)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), guardSummary(rep))
			return rep.Err()
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.WorkflowID, "workflow", "", "id of the workflow")
	fs.StringVar(&o.Spec.Node, "node", "", "name of the node that writes")
	fs.StringVar(&o.Spec.Key, "key", "", "expression of the event's own id on the item the node gets, e.g. '$json.body.event_id'")
	fs.StringVar(&o.Spec.Namespace, "namespace", "", "guard namespace (default: <workflow>.<node>, lower case)")
	fs.StringVar(&o.Spec.Destination, "destination", "", "destination for the circuit breaker (default: the host the node writes to, else its node type)")
	fs.BoolVar(&o.Spec.Park, "park", false, "park events while the destination is paused (a Wait node the guard resumes)")
	fs.StringVar(&o.Spec.GuardURL, "guard-url", "", "address at which n8n reaches n8n-guard (default: the one in the installed error handler)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print what would change and change nothing")
	fs.StringVar(&data, "data", DefaultDataDir, "with --park: data folder whose resume-secret makes the credential \"n8n-guard resume\" when n8n has none (N8N_GUARD_RESUME_SECRET first)")
	fs.StringVar(&store, "store", "", "with --park: the guards' PostgreSQL URL, where their resume secret is read when N8N_GUARD_RESUME_SECRET is not set")
	bindEnv(fs, "guard-url", "N8N_GUARD_URL")
	for _, name := range []string{"workflow", "node", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func guardSummary(rep *n8n.Report) string {
	if rep.Changes() == 0 {
		return "nothing to change: the node is guarded"
	}
	return rep.Summary()
}
