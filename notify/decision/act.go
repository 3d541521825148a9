package decision

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/slack/mrkdwn"
)

// act carries out a click: it finds the notification the buttons act on,
// checks that the person may decide, lets decideClick decide, carries out
// the side effect (the key's resolution, the execution's retry) and
// records the decision. Anything refused is answered to that person alone
// and changes nothing.
func (d *Decider) act(ctx context.Context, c Click) {
	id, attempt, version := parseButtonValue(c.Value)
	id = d.targetOf(ctx, id)
	// Two clicks about one notification decide one after the other (the
	// second sees the first's decision); clicks about others go on.
	defer d.clickLocks.lock(id)()
	target, refusal := d.authorize(ctx, id, c)
	if refusal != "" {
		d.ephemeral(ctx, c, refusal)
		return
	}
	if approvalAction(c.Action) {
		d.actApproval(ctx, target, c) // approval.go
		return
	}
	if target.IsKeyGroup() && (c.Action == notify.ActionComplete || c.Action == notify.ActionRetry) {
		d.actGroup(ctx, target, c, version) // group.go
		return
	}
	step := decideClick(target, c.Action, d.executions != nil)
	if step.Refusal != "" {
		d.ephemeral(ctx, c, step.Refusal)
		return
	}
	retriedAs, refusal := d.carryOut(ctx, target, c, step.Decision, attempt, version)
	if refusal != "" {
		d.ephemeral(ctx, c, refusal)
		return
	}
	if err := d.record(ctx, target.ID, step.Decision, c.UserID, retriedAs); err != nil {
		d.log.Error("recording a decision from Slack failed", "id", target.ID, "err", err)
		d.ephemeral(ctx, c, "n8n-guard could not record your decision on the notification (its store failed); try again.")
		return
	}
	d.ackKeys(ctx, target, step.Decision, c)           // ackkeys.go
	d.auditFailure(ctx, target, step.Decision, c.by()) // failure.go
	d.m.decisions.WithLabelValues(step.Decision).Inc()
	d.log.Info("decision from Slack", "id", target.ID, "kind", target.Kind, "decision", step.Decision, "user", c.UserID,
		"namespace", target.Namespace, "key", target.Key)
}

// targetOf is the notification a button acts on: an escalation's buttons
// act on the notification it escalates.
func (d *Decider) targetOf(ctx context.Context, id string) string {
	if r, err := d.outbox.Get(ctx, id); err == nil && r != nil && r.Kind == notify.KindEscalation {
		return r.EscalationOf
	}
	return id
}

// authorize loads the target and checks that the person may decide it.
func (d *Decider) authorize(ctx context.Context, id string, c Click) (*notify.Record, string) {
	target, err := d.outbox.Get(ctx, id)
	if err != nil || target == nil {
		d.log.Warn("a Slack button names no notification this guard knows", "id", id, "err", err)
		return nil, "n8n-guard does not know this message any more (it may have been purged); nothing changed."
	}
	ok, err := d.notes.MayDecide(ctx, target, c.UserID)
	if err != nil {
		d.log.Warn("could not check who may decide", "id", target.ID, "err", err)
		return nil, "n8n-guard could not check whether you may decide this (Slack did not answer); nothing changed. Try again in a minute."
	}
	if !ok {
		d.log.Info("a Slack user not allowed to decide pressed a button", "id", target.ID, "user", c.UserID, "action", c.Action)
		return nil, "Not allowed — ask " + d.mentionOf(ctx, target.Owner) +
			". Only the owner, the resolvers and the escalation steps in the n8n-guard config decide this; nothing changed."
	}
	return target, ""
}

// carryOut does what a decision needs outside the outbox, after checking
// that the button was rendered for the notification as it stands (key
// attempt, version). It returns the retried execution's id, or the
// refusal.
func (d *Decider) carryOut(ctx context.Context, target *notify.Record, c Click, decision string, attempt, version int) (retriedAs, refusal string) {
	switch decision {
	case notify.DecisionCompleted, notify.DecisionRetry:
		return "", d.resolveKey(ctx, target, c, attempt, version)
	}
	if stale(target, attempt, version) {
		return "", d.outOfDate(target)
	}
	if decision == notify.DecisionRetried {
		if refusal := d.checkExecution(ctx, target); refusal != "" { // rerun.go
			return "", refusal
		}
		if guarded, answer, refusal := d.rerunAtGate(ctx, target, c); guarded { // rerun.go
			if refusal == "" {
				d.ephemeral(ctx, c, answer)
			}
			return "", refusal
		}
		return d.retryExecution(ctx, target)
	}
	return "", ""
}

// outOfDate answers a click on a button rendered for an older attempt or
// version of the notification.
func (d *Decider) outOfDate(r *notify.Record) string {
	d.m.refusedClicks.Inc()
	base := baseURL(d.notes.ConsoleURL())
	where := base + "/ui/notifications"
	if r.Kind == notify.KindKeyUnknown {
		where = base + "/ui/key?" + url.Values{"namespace": {r.Namespace}, "key": {r.Key}}.Encode()
	}
	return fmt.Sprintf("This message is out of date (it was shown for an earlier attempt or state); nothing changed. The current state: %s", mrkdwn.Escape(where))
}

func baseURL(u string) string {
	if u == "" {
		return "$N8N_GUARD_URL"
	}
	return u
}

// record saves the decision on the notification and on every escalation
// message about it.
func (d *Decider) record(ctx context.Context, id, decision, user, retriedAs string) error {
	updated, err := d.notes.RecordDecision(ctx, id, decision, user, "", retriedAs)
	if err == nil && updated == nil {
		err = errors.New("the notification is gone")
	}
	return err
}

// resolveKey records the decision on the key, for the attempt the button
// was rendered for. It returns the answer for the person when nothing
// changed.
func (d *Decider) resolveKey(ctx context.Context, r *notify.Record, c Click, attempt, version int) string {
	if d.keys == nil {
		return "This n8n-guard cannot resolve keys from Slack (no store is wired to notifications); nothing changed."
	}
	cur, err := d.keys.Lookup(ctx, r.Namespace, r.Key)
	if err != nil {
		d.log.Warn("looking up a key for a Slack decision failed", "namespace", r.Namespace, "key", r.Key, "err", err)
		return "n8n-guard could not read the key (its store failed); nothing changed. Try again."
	}
	if cur.Record == nil {
		return fmt.Sprintf("Key `%s` is not in the store any more (purged); nothing changed.", mrkdwn.Escape(r.Key))
	}
	if r.KeyAttempt != 0 && cur.Record.Attempt != r.KeyAttempt {
		// The message is about an attempt that is over: whatever the key
		// is now, nobody looked at it through this message.
		return d.outOfDate(r)
	}
	if cur.Record.State != keystore.StateUnknown {
		d.notes.ResolvedElsewhere(ctx, r, cur.Record, d.now())
		return alreadyResolved(cur.Record)
	}
	if stale(r, attempt, version) {
		return d.outOfDate(r)
	}
	res := keystore.StateCompleted
	note := "Decided in Slack: it happened — marked completed."
	if c.Action == notify.ActionRetry {
		res, note = keystore.StateFailed, "Decided in Slack: it did not happen — a retry is allowed."
	}
	_, err = d.keys.Resolve(ctx, keystore.ResolveRequest{
		Namespace: r.Namespace, Key: r.Key, Resolution: res, By: c.by(), Note: note,
		Attempt: r.KeyAttempt, // 0: the message predates attempts in messages
	})
	var ke *errs.Error
	switch {
	case errors.As(err, &ke) && ke.Code == errs.Conflict:
		if again, lerr := d.keys.Lookup(ctx, r.Namespace, r.Key); lerr == nil && again.Record != nil && again.Record.State != keystore.StateUnknown {
			d.notes.ResolvedElsewhere(ctx, r, again.Record, d.now())
			return alreadyResolved(again.Record)
		}
		return "The key could not be resolved: " + mrkdwn.Escape(ke.Message) + ". Nothing changed."
	case err != nil:
		d.log.Warn("resolving a key from Slack failed", "namespace", r.Namespace, "key", r.Key, "err", err)
		return "n8n-guard could not resolve the key (" + mrkdwn.Escape(errs.MessageOf(err)) + "); nothing changed."
	}
	return ""
}

func alreadyResolved(rec *keystore.Record) string {
	if rec.ResolvedBy != "" && rec.ResolvedAt != nil {
		return fmt.Sprintf("Already resolved: %s decided `%s` at %s. Nothing changed.",
			mrkdwn.Escape(rec.ResolvedBy), rec.State, notify.Clock(*rec.ResolvedAt))
	}
	return fmt.Sprintf("The key is `%s` now, no longer unknown. Nothing changed.", rec.State)
}

// retryExecution carries out "Retry execution" for r. It returns the new
// execution's id, or the answer for the person when nothing changed.
func (d *Decider) retryExecution(ctx context.Context, r *notify.Record) (newID, refusal string) {
	id, err := d.executions.Retry(ctx, r.ExecutionID)
	var re *notify.RetryError
	switch {
	case errors.As(err, &re) && re.Refusal == notify.RetryNotFound:
		return "", fmt.Sprintf("n8n does not know execution %s (deleted, or the API key may not run this workflow); nothing changed.", mrkdwn.Escape(r.ExecutionID))
	case errors.As(err, &re) && re.Refusal == notify.RetryConflict:
		return "", "n8n refused to retry: " + mrkdwn.Escape(re.Message) + ". Nothing changed."
	case errors.As(err, &re) && re.Refusal == notify.RetryUnauthorized:
		d.log.Error("n8n refused the API key for a retry (check N8N_API_KEY and its execution:retry scope)", "message", re.Message)
		return "", "n8n refused n8n-guard's API key; the operator must fix N8N_API_KEY. Nothing changed."
	case err != nil:
		d.log.Warn("retrying an execution in n8n failed", "execution", r.ExecutionID, "err", err)
		return "", "n8n did not confirm the retry (" + mrkdwn.Escape(notify.Truncate(err.Error(), 200)) +
			"). Check its executions list before trying again: it may have started."
	}
	return id, ""
}

// mentionOf is the owner as Slack shows it, without calling Slack.
func (d *Decider) mentionOf(ctx context.Context, owner string) string {
	switch {
	case notify.IsUserID(owner):
		return "<@" + owner + ">"
	case notify.IsGroupID(owner):
		return "<!subteam^" + owner + ">"
	case owner == "":
		return "the n8n-guard operator (no owner is configured)"
	}
	if id, ok, _ := d.outbox.SlackUser(ctx, owner); ok {
		return "<@" + id + ">"
	}
	return mrkdwn.Escape(owner)
}

// ephemeral answers the person who clicked, visible to them alone.
func (d *Decider) ephemeral(ctx context.Context, c Click, text string) {
	if d.slack == nil || c.Channel == "" || c.UserID == "" {
		return
	}
	if err := d.notes.CallSlack(ctx, "chat.postEphemeral", func() error { return d.slack.Ephemeral(ctx, c.Channel, c.UserID, text) }); err != nil {
		d.log.Warn("could not answer a Slack user", "user", c.UserID, "reason", notify.SlackReason(err))
	}
}
