package decision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/slack/mrkdwn"
)

// Approve and Reject (notify/approval.go): the decision goes to the
// keystore, which writes who, when and why in the key's history; the
// message then shows it. Reject opens a form for the reason (a Slack
// modal). A replayed or late click changes nothing and says so.

// ReasonForm is what the Reject button's modal carries back: the button's
// value and where the message is (for answers to the person).
type ReasonForm struct {
	Value   string `json:"v"`
	Channel string `json:"c,omitempty"`
}

func approvalAction(a string) bool {
	return a == notify.ActionApprove || a == notify.ActionReject || a == notify.ActionRejectReason
}

// actApproval carries out Approve, Reject (which opens the reason form)
// and the form's submission.
func (d *Decider) actApproval(ctx context.Context, target *notify.Record, c Click) {
	if target.Kind != notify.KindApproval {
		d.ephemeral(ctx, c, "This message is not an approval request; nothing changed.")
		return
	}
	keys := d.keys
	if keys == nil {
		d.ephemeral(ctx, c, "This n8n-guard cannot decide approvals from Slack (no store is wired to notifications); nothing changed.")
		return
	}
	if c.Action == notify.ActionReject {
		d.askReason(ctx, target, c)
		return
	}
	by := c.by()
	req := keystore.ApprovalRequest{Namespace: target.Namespace, Key: target.Key, By: by,
		// The user ID is Slack's word; the name is whatever the user chose.
		Identities: []string{c.UserID}, Claimed: []string{c.UserName}}
	decide, decision := keys.Approve, notify.DecisionApproved
	if c.Action == notify.ActionRejectReason {
		decide, decision, req.Note = keys.Reject, notify.DecisionRejected, strings.TrimSpace(c.Note)
		if req.Note == "" {
			d.ephemeral(ctx, c, "A rejection needs its reason; nothing changed.")
			return
		}
	}
	res, err := decide(ctx, req)
	var ke *errs.Error
	switch {
	case errors.As(err, &ke) && (ke.Code == errs.Conflict || ke.Code == errs.Forbidden || ke.Code == errs.NotFound):
		d.m.refusedClicks.Inc()
		d.ephemeral(ctx, c, mrkdwn.Escape(ke.Message)+".")
		return
	case err != nil:
		d.log.Warn("deciding an approval from Slack failed", "namespace", target.Namespace, "key", target.Key, "err", err)
		d.ephemeral(ctx, c, "n8n-guard could not record your decision ("+mrkdwn.Escape(errs.MessageOf(err))+"); nothing changed. Try again.")
		return
	case res.Replayed:
		// A replayed or late click: the key was decided before.
		d.m.refusedClicks.Inc()
		who, at := "someone", ""
		if res.Record != nil {
			who = cmpOr(res.Record.ResolvedBy, who)
			if res.Record.ResolvedAt != nil {
				at = " at " + notify.Clock(*res.Record.ResolvedAt)
			}
		}
		d.ephemeral(ctx, c, fmt.Sprintf("Already %s by %s%s. Nothing changed.", decision, mrkdwn.Escape(who), at))
		return
	}
	if err := d.record(ctx, target.ID, decision, c.UserID, ""); err != nil {
		d.log.Error("recording an approval from Slack on its message failed", "id", target.ID, "err", err)
	}
	d.m.decisions.WithLabelValues(decision).Inc()
	d.log.Info("approval decided in Slack", "id", target.ID, "decision", decision, "user", c.UserID,
		"namespace", target.Namespace, "key", target.Key)
}

// askReason opens the form that asks for a rejection's reason; nothing
// is decided until it is sent.
func (d *Decider) askReason(ctx context.Context, target *notify.Record, c Click) {
	if target.Decision == notify.DecisionApproved || target.Decision == notify.DecisionRejected {
		d.m.refusedClicks.Inc()
		d.ephemeral(ctx, c, "Already decided: "+notify.DecisionText(target)+". Nothing changed.")
		return
	}
	if d.slack == nil || c.TriggerID == "" {
		d.ephemeral(ctx, c, "Give the reason in the console or with POST /v1/reject; nothing changed.")
		return
	}
	meta, _ := json.Marshal(ReasonForm{Value: c.Value, Channel: c.Channel})
	if err := d.notes.CallSlack(ctx, "views.open", func() error {
		return d.slack.AskReason(ctx, c.TriggerID, string(meta), "Reject "+notify.Truncate(target.Key, 40))
	}); err != nil {
		d.log.Warn("could not open the reason form of a rejection", "user", c.UserID, "reason", notify.SlackReason(err))
		d.ephemeral(ctx, c, "Slack did not open the form for the reason; nothing changed. Try again, or reject in the console.")
	}
}
