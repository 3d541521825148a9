package notify

import (
	"context"
	"fmt"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// auditFailure writes a person's decision on a failed execution (its
// acknowledgement, snooze or retry, from the console or Slack) to the
// store's event log, so the audit lists it with who took it, beside the
// key decisions. The decision on the notification stands whatever the
// store says: a failed write is logged, not answered. A failure whose
// Slack message died is audited like any other, saying its owner was
// not told: the console is then the only place it was decided.
func (s *Service) auditFailure(ctx context.Context, r *Record, decision, by string) {
	if r.Kind != KindWorkflowFailed || s.opts.Keys == nil {
		return
	}
	ev := keystore.Event{Kind: keystore.EventFailureDecided, Owner: by, Message: decision, Summary: failureWords(r)}
	if err := s.opts.Keys.RecordDecision(ctx, ev); err != nil {
		s.log.Error("the audit could not record a decision on a failed execution; the decision stands", "id", r.ID,
			"decision", decision, "by", by, "err", err)
	}
}

// failureWords says what failed, for the audit: the workflow, the node,
// the execution, the notification, and whether its owner heard of it.
func failureWords(r *Record) string {
	w := fmt.Sprintf("execution %s of workflow %s", cmpOr(r.ExecutionID, "(unknown)"), cmpOr(cmpOr(r.WorkflowName, r.WorkflowID), "(unknown)"))
	if r.Node != "" {
		w += " (node " + r.Node + ")"
	}
	w += ", notification " + r.ID
	switch r.Status {
	case StatusDead:
		w += "; its Slack message could not be delivered, so its owner " + cmpOr(r.Owner, "(none configured)") + " was not told in Slack"
	case StatusPending:
		w += "; its Slack message was not delivered yet"
	}
	return w
}
