package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/n8nsetup"
)

// n8nGuardLong is the help of n8n guard.
const n8nGuardLong = `Rewrite one workflow through n8n's public API so that the node that writes
is guarded: with the community node n8n-nodes-n8n-guard when n8n has it
(--use auto, the default; see below), else with the shipped HTTP-node
templates: a reserve in front of it
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

Which nodes (--use): auto asks n8n through its public API whether it has
the community node (GET /credentials/schema/n8nGuardApi: its credential
type is known only when the package is loaded) and takes the node's type
from a workflow that uses it already, or on 2.x from the list of installed
community packages (scope communityPackage:list); when it cannot tell, it
uses the HTTP templates and says so. --use community insists (the type of
the installed package when it cannot be told), --use http never uses it.
The community node's Reserve (its Proceed output) stands in front of the
node, Complete after it, Fail with the reason Auto (the same rules) on its
error output; its credential (type n8nGuardApi) is the one named
"n8n-guard API", else the one the instance's community nodes use, else
guard creates it from the guard's address and token (N8N_GUARD_TOKEN or
--data). --park is always placed with the HTTP templates: the node's Fail
sends no resume URL, so a write that fails as its destination goes down
would stop instead of parking (--use community --park is refused).

Idempotent: a guarded node is left as it is. Nothing is unpublished: on 2.x
a published workflow without unpublished edits goes live with the change;
one with unpublished edits is saved as a draft, and the command says so.
Refused, with the reason and the recipe by hand: several inputs into the
node, a loop back into it, a node in a sub-workflow (Execute Workflow
Trigger), a node that handles its own failures (On Error set).`

func newN8NGuardCmd(f *n8nFlags, getenv func(string) string) *cobra.Command {
	var (
		o                n8nsetup.GuardOptions
		data, store, use string
	)
	cmd := &cobra.Command{
		Use:   "guard --workflow <id> --node <name> --key <expression>",
		Short: "Put n8n-guard in front of one node that writes: reserve, complete, fail (and park)",
		Long:  n8nGuardLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Use, err = n8nsetup.ParseUse(use); err != nil {
				return err
			}
			// The community node's credential is made from it when n8n
			// has none; without it guard says what is missing.
			o.Token, _ = guardToken(getenv, data)
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
	addN8NGuardFlags(cmd, &o, &data, &store, &use)
	return cmd
}

// addN8NGuardFlags binds guard's flags to the options they set.
func addN8NGuardFlags(cmd *cobra.Command, o *n8nsetup.GuardOptions, data, store, use *string) {
	fs := cmd.Flags()
	fs.StringVar(&o.WorkflowID, "workflow", "", "id of the workflow")
	fs.StringVar(&o.Spec.Node, "node", "", "name of the node that writes")
	fs.StringVar(&o.Spec.Key, "key", "", "expression of the event's own id on the item the node gets, e.g. '$json.body.event_id'")
	fs.StringVar(&o.Spec.Namespace, "namespace", "", "guard namespace (default: <workflow>.<node>, lower case)")
	fs.StringVar(&o.Spec.Destination, "destination", "", "destination for the circuit breaker (default: the host the node writes to, else its node type)")
	fs.BoolVar(&o.Spec.Park, "park", false, "park events while the destination is paused (a Wait node the guard resumes)")
	fs.StringVar(&o.Spec.GuardURL, "guard-url", "", "address at which n8n reaches n8n-guard (default: the one in the installed error handler)")
	fs.StringVar(use, "use", "auto", "which nodes guard: auto (the community node when n8n has it, else the HTTP templates), community, http")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print what would change and change nothing")
	fs.StringVar(data, "data", DefaultDataDir, "data folder whose resume-secret makes the credential \"n8n-guard resume\" with --park, and whose api-token the community node's credential, when n8n has none (N8N_GUARD_RESUME_SECRET, N8N_GUARD_TOKEN first)")
	fs.StringVar(store, "store", "", "with --park: the guards' PostgreSQL URL, where their resume secret is read when N8N_GUARD_RESUME_SECRET is not set")
	bindEnv(fs, "guard-url", "N8N_GUARD_URL")
	for _, name := range []string{"workflow", "node", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
}

func guardSummary(rep *n8nsetup.Report) string {
	if rep.Changes() == 0 {
		return "nothing to change: the node is guarded"
	}
	return rep.Summary()
}
