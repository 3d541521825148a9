package decision

import (
	"context"
	"fmt"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// DecideFailure records a person's decision on a failed execution taken
// outside Slack (the console): notify.ActionAck or notify.ActionSnooze,
// by the name of who took it. It goes the buttons' way (decideClick,
// notify.Service.RecordDecision): its Slack
// message, and those escalating it, show the decision and lose the
// buttons it ends. A decision already taken is a conflict.
func (d *Decider) DecideFailure(ctx context.Context, id, action, by string) (*notify.Record, error) {
	if !notify.IsID(id) {
		return nil, &errs.Error{Code: errs.InvalidRequest, Message: "id is not a notification id (n_…)",
			Fields: []errs.FieldError{{Field: "id", Rule: "notification_id"}}}
	}
	if action != notify.ActionAck && action != notify.ActionSnooze {
		return nil, &errs.Error{Code: errs.InvalidRequest, Message: "action must be acknowledge or snooze",
			Fields: []errs.FieldError{{Field: "action", Rule: "oneof=acknowledge snooze"}}}
	}
	id = d.targetOf(ctx, id)
	defer d.clickLocks.lock(id)() // one decision at a time, as clicks
	target, err := d.outbox.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if target == nil {
		return nil, errs.Errorf(errs.NotFound, "no notification %s (it may have been purged)", id)
	}
	if target.Kind != notify.KindWorkflowFailed {
		return nil, errs.Errorf(errs.Conflict, "notification %s is about %s, not a failed execution", id, target.Kind)
	}
	step := decideClick(target, action, false)
	if step.Refusal != "" {
		return nil, errs.Errorf(errs.Conflict, "already taken: %s; nothing changed", decidedBy(target))
	}
	updated, err := d.notes.RecordDecision(ctx, id, step.Decision, "", notify.Truncate(by, 200), "")
	if err == nil && updated == nil {
		err = errs.Errorf(errs.NotFound, "no notification %s (it may have been purged)", id)
	}
	if err != nil {
		return nil, err
	}
	d.auditFailure(ctx, updated, step.Decision, by)
	d.m.decisions.WithLabelValues(step.Decision).Inc()
	d.log.Info("decision from the console", "id", id, "kind", target.Kind, "decision", step.Decision, "by", by)
	return updated, nil
}

// decidedBy says who took r's decision, in plain words.
func decidedBy(r *notify.Record) string {
	who := r.DecidedByName
	if r.DecidedBy != "" {
		who = "Slack user " + r.DecidedBy
	}
	return fmt.Sprintf("%s by %s", r.Decision, cmpOr(who, "someone"))
}

// auditFailure writes a person's decision on a failed execution (its
// acknowledgement, snooze or retry, from the console or Slack) to the
// store's event log, so the audit lists it with who took it, beside the
// key decisions. The decision on the notification stands whatever the
// store says: a failed write is logged, not answered. A failure whose
// Slack message died is audited like any other, saying its owner was
// not told: the console is then the only place it was decided.
func (d *Decider) auditFailure(ctx context.Context, r *notify.Record, decision, by string) {
	if r.Kind != notify.KindWorkflowFailed || d.keys == nil {
		return
	}
	ev := keystore.Event{Kind: keystore.EventFailureDecided, Owner: by, Message: decision, Summary: failureWords(r)}
	if err := d.keys.RecordDecision(ctx, ev); err != nil {
		d.log.Error("the audit could not record a decision on a failed execution; the decision stands", "id", r.ID,
			"decision", decision, "by", by, "err", err)
	}
}

// failureWords says what failed, for the audit: the workflow, the node,
// the execution, the notification, and whether its owner heard of it.
func failureWords(r *notify.Record) string {
	w := fmt.Sprintf("execution %s of workflow %s", cmpOr(r.ExecutionID, "(unknown)"), cmpOr(cmpOr(r.WorkflowName, r.WorkflowID), "(unknown)"))
	if r.Node != "" {
		w += " (node " + r.Node + ")"
	}
	w += ", notification " + r.ID
	switch r.Status {
	case notify.StatusDead:
		w += "; its Slack message could not be delivered, so its owner " + cmpOr(r.Owner, "(none configured)") + " was not told in Slack"
	case notify.StatusPending:
		w += "; its Slack message was not delivered yet"
	}
	return w
}
