package notify

import (
	"context"
	"fmt"

	"github.com/n8n-guard/n8n-guard/rerun"
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
func (s *Service) rerunAtGate(ctx context.Context, r *Record, c Click) (guarded bool, answer, refusal string) {
	if s.opts.Reruns == nil || s.opts.Keys == nil || r.WorkflowID == "" || r.ExecutionID == "" {
		return false, "", ""
	}
	owner := "n8n " + r.WorkflowID + " exec " + r.ExecutionID // as the gate's reserve names it
	keys, already, err := rerun.Grant(ctx, s.opts.Keys, owner, "", c.by(), "re-run from Slack")
	if err != nil {
		s.log.Warn("allowing the re-run of an execution's keys from Slack failed", "execution", r.ExecutionID, "err", err, "allowed", len(keys))
	}
	allowed := len(keys) + already // a repeat is allowed as well
	switch {
	case allowed == 0 && err == nil:
		return false, "", "" // no key waits at its gate: n8n's plain retry
	case allowed == 0:
		return true, "", "n8n-guard could not allow the re-run of execution " + EscapeMrkdwn(r.ExecutionID) + " (see its log); nothing changed. Try again."
	}
	s.opts.Reruns.Kick()
	events := fmt.Sprintf("%d events", allowed)
	if allowed == 1 {
		events = "1 event"
	}
	return true, fmt.Sprintf("Re-run allowed for %s; the guard re-runs execution %s.", events, EscapeMrkdwn(r.ExecutionID)), ""
}
