package decision

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/rerun"
	"github.com/n8n-guard/n8n-guard/slack/mrkdwn"
)

// Re-runs from Slack. n8n's retry of an execution guarded by `n8n guard`
// continues at its re-run gate, which refuses until a person allows the
// re-run: a plain retry would fail there again. So "Retry execution" on
// such an execution allows the re-run of its keys waiting at the gate
// (keystore's resolve with rerun, as the console's "allow a retry and
// re-run") and wakes the guard's re-run worker (Options.Reruns), which
// asks n8n to retry the execution once for all of them.

// rerunAtGate allows the re-run of r's execution when keys of it wait at
// its re-run gate, or were allowed already. guarded: so it is, and the
// person's answer (or the refusal) is said; else n8n's plain retry
// follows.
func (d *Decider) rerunAtGate(ctx context.Context, r *notify.Record, c Click) (guarded bool, answer, refusal string) {
	if d.reruns == nil || d.keys == nil || r.WorkflowID == "" || r.ExecutionID == "" {
		return false, "", ""
	}
	owner := "n8n " + r.WorkflowID + " exec " + r.ExecutionID // as the gate's reserve names it
	namespaces, err := d.gateNamespaces(ctx, owner)
	if err != nil {
		d.log.Warn("listing an execution's keys at its re-run gate for a Slack click failed", "execution", r.ExecutionID, "err", err)
		return true, "", "n8n-guard could not read the keys of execution " + mrkdwn.Escape(r.ExecutionID) + " (its store failed); nothing changed. Try again."
	}
	if refusal := d.mayDecideAll(ctx, namespaces, c); refusal != "" {
		return true, "", refusal
	}
	var keys []*keystore.Record
	already := 0
	for _, ns := range namespaces { // only the namespaces checked: a key of another one arriving meanwhile is not granted
		k, a, gerr := rerun.Grant(ctx, d.keys, owner, ns, c.by(), "re-run from Slack")
		keys, already, err = append(keys, k...), already+a, cmp.Or(err, gerr)
	}
	if err != nil {
		d.log.Warn("allowing the re-run of an execution's keys from Slack failed", "execution", r.ExecutionID, "err", err, "allowed", len(keys))
	}
	allowed := len(keys) + already // a repeat is allowed as well
	switch {
	case allowed == 0 && err == nil:
		return false, "", "" // no key waits at its gate: n8n's plain retry
	case allowed == 0:
		return true, "", "n8n-guard could not allow the re-run of execution " + mrkdwn.Escape(r.ExecutionID) + " (see its log); nothing changed. Try again."
	}
	d.reruns.Kick()
	events := fmt.Sprintf("%d events", allowed)
	if allowed == 1 {
		events = "1 event"
	}
	return true, fmt.Sprintf("Re-run allowed for %s; the guard re-runs execution %s.", events, mrkdwn.Escape(r.ExecutionID)), ""
}

// gateNamespaces lists the namespaces of the failed keys the execution
// holder left at its re-run gate (granted already or not).
func (d *Decider) gateNamespaces(ctx context.Context, holder string) ([]string, error) {
	var out []string
	for rec, err := range keystore.Listed(ctx, d.keys, keystore.ListQuery{Owner: holder, State: keystore.StateFailed, Limit: 1000}) {
		if err != nil {
			return nil, err
		}
		h, granted := keystore.RerunGranted(rec)
		if ((granted && h == holder) || keystore.RerunHolder(rec) == holder) && !slices.Contains(out, rec.Namespace) {
			out = append(out, rec.Namespace)
		}
	}
	slices.Sort(out)
	return out, nil
}

// mayDecideAll refuses, in the words the API's and the console's 403
// would use, a click that would allow keys of a namespace its person may
// not decide (notify.Service.MayDecideNamespace): all of them or none.
func (d *Decider) mayDecideAll(ctx context.Context, namespaces []string, c Click) string {
	var not []string
	for _, ns := range namespaces {
		ok, err := d.notes.MayDecideNamespace(ctx, ns, c.UserID)
		if err != nil {
			d.log.Warn("could not check who may decide a namespace", "namespace", ns, "err", err)
			return "n8n-guard could not check whether you may decide namespace " + mrkdwn.Escape(ns) + " (Slack did not answer); nothing changed. Try again in a minute."
		}
		if !ok {
			not = append(not, ns)
		}
	}
	if len(not) == 0 {
		return ""
	}
	d.log.Warn("a Slack user pressed Retry execution on keys of namespaces they may not decide; refused",
		"user", c.UserID, "namespaces", not)
	return "Forbidden: this execution waits at its re-run gate with keys of namespace " + mrkdwn.Escape(strings.Join(not, ", ")) +
		", which you may not decide (only that namespace's owner, resolvers and escalation steps in the n8n-guard config do); nothing changed."
}

// checkExecution is the click's own check, asked of n8n at the click
// (a message delivered before the check existed has no answer kept):
// the refusal for the person, or "".
func (d *Decider) checkExecution(ctx context.Context, r *notify.Record) string {
	why, err := notify.ExecutionMismatch(ctx, d.executions, r)
	switch {
	case err != nil:
		d.log.Warn("cannot ask n8n whose execution a failure names; Retry execution refused", "id", r.ID, "execution", r.ExecutionID, "err", err)
		return "n8n-guard could not ask n8n which workflow execution " + mrkdwn.Escape(r.ExecutionID) + " belongs to; nothing changed. Try again in a minute."
	case why != "":
		d.log.Warn("Retry execution refused: the failure names an execution of another workflow than n8n says",
			"id", r.ID, "workflow", r.WorkflowID, "workflow_name", r.WorkflowName, "execution", r.ExecutionID)
		return "Refused: " + mrkdwn.Escape(why) + " (n8n says so). n8n-guard retries only an execution of the workflow a failure came from; nothing changed."
	}
	return ""
}
