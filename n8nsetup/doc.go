// Package n8nsetup is the workflow rewriter behind `n8n-guard n8n setup`,
// `check`, `audit` and `guard`, run from the CLI only: Connect finds which
// n8n answers (and refuses one the commands were never checked against);
// Setup installs the guard's credentials, its error handler and examples
// and points workflows at the handler; Check says why a workflow would
// stay silent; Audit classifies every node and lists the writes no guard
// covers; Guard (PlanGuard) rewrites a workflow so a write reserves,
// completes and fails with the guard, with its re-run gate and parking.
//
// It imports n8n, the runtime adapter, for every call to n8n (n8n.Client
// and its Do: one base URL, key, body limit and error text), the workflow
// as n8n lists it, the version read, the rule that tells a guard node
// (n8n.GuardOperation) and the name of the gate's reserve node; workflows
// for the shipped workflows and templates it installs and copies; and
// rerun for the re-run gate's name (rerun.GateNodePrefix), which the
// re-run worker looks for.
//
// It must never be imported by a package of the running guard (catchup,
// rerun, reconcile, notify, keystore, api, slack, n8n): only by
// cmd/n8n-guard and tests (deps_test.go fails otherwise). It never builds
// an HTTP request to n8n itself, and never puts live a team's workflow
// that was not, nor its unpublished edits: the only workflow it publishes
// is the guard's own error handler.
package n8nsetup
