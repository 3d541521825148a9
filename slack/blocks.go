package slack

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/decision"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// message is what one Slack call sends: Block Kit blocks and the plain-text
// fallback (shown in notifications and by clients without blocks).
type message struct {
	Text   string
	Blocks []slack.Block
}

func (m message) options() []slack.MsgOption {
	return []slack.MsgOption{
		slack.MsgOptionText(m.Text, false),
		slack.MsgOptionBlocks(m.Blocks...),
		slack.MsgOptionDisableLinkUnfurl(),
	}
}

// render builds the message of r. mention is the owner as Slack mrkdwn
// (<@U…>, <!subteam^S…>) or plain words when it could not be resolved.
// Everything taken from a payload is already redacted; here it is also
// escaped, so it cannot mention anyone or inject links.
func render(m notify.Message) message {
	msg := renderKind(m)
	msg.Blocks = append(msg.Blocks, linkBlock(m.Links)...)
	return msg
}

func renderKind(m notify.Message) message {
	r, mention, guardURL := m.Record, m.Mention, m.GuardURL
	if r.IsKeyGroup() {
		return renderKeyGroup(r, mention, guardURL, m.Links)
	}
	switch r.Kind {
	case notify.KindKeyUnknown:
		return renderKeyUnknown(r, mention, guardURL)
	case notify.KindEscalation:
		return renderEscalation(r, mention, guardURL)
	case notify.KindApproval:
		return renderApproval(r, mention, guardURL, m.Approvers)
	case notify.KindBreakerOpened, notify.KindBreakerClosed:
		return renderBreaker(r, mention)
	case notify.KindParkedLost, notify.KindParkedOverdue:
		return renderParked(r, mention, guardURL)
	case notify.KindRecordDamaged:
		return renderDamaged(r, mention)
	case notify.KindRerunRefused:
		return renderRerunRefused(r, mention)
	}
	return renderWorkflowFailed(r, mention, m.CanRetry)
}

// mrkdwn is verbatim: Slack then parses only the explicit markup we write
// (<@U…>, <url|label>), never a bare "@channel" or URL in payload text.
func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, true)
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, notify.Truncate(s, 150), false, false)
}

func field(label, value string) *slack.TextBlockObject {
	return mrkdwn("*" + label + "*\n" + notify.Truncate(value, 1900))
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func renderWorkflowFailed(r *notify.Record, mention string, canRetry bool) message {
	name := r.WorkflowName
	if name == "" {
		name = r.WorkflowID
	}
	if name == "" {
		name = "(unnamed workflow)"
	}
	by := ""
	if r.Deadline != nil {
		by = deadlineText(*r.Deadline, r.FirstAt)
	}

	lead := mention + ": an n8n workflow you own failed."
	if by != "" {
		lead += " Please act *" + by + "*."
	}
	wf := escape(name)
	if r.WorkflowID != "" && r.WorkflowID != name {
		wf += " (`" + escape(r.WorkflowID) + "`)"
	}
	exec := orDash(escape(r.ExecutionID))
	if r.RetryOf != "" {
		exec += " (retry of " + escape(r.RetryOf) + ")"
	}
	errKind := escape(r.ErrorName)
	if r.HTTPCode != "" {
		errKind = strings.TrimPrefix(errKind+" · HTTP "+escape(r.HTTPCode), " · ")
	}
	node := escape(r.Node)
	if r.NodeType != "" {
		node += " (" + escape(strings.TrimPrefix(r.NodeType, "n8n-nodes-base.")) + ")"
	}
	fields := []*slack.TextBlockObject{
		field("Workflow", wf),
		field("Failed node", orDash(node)),
		field("Mode", orDash(escape(r.Mode))),
		field("Execution", exec),
		field("Error", orDash(errKind)),
		field("Owner", mention),
	}
	msg := escape(r.Message)
	if msg == "" {
		msg = "(no error message)"
	}
	errText := "*Error message*\n> " + msg
	if r.Description != "" {
		errText += "\n> " + escape(r.Description)
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain("n8n workflow failed: " + name)),
		slack.NewSectionBlock(mrkdwn(lead), fields, nil),
		slack.NewSectionBlock(mrkdwn(errText), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+atGate(r, canRetry)+nextStep(r.Runbook)), nil, nil),
		slack.NewContextBlock("", mrkdwn(occurrences(r)+" · ref `"+r.ID+"`")),
	}
	blocks = append(blocks, decisionBlocks(r, canRetry)...)

	text := fmt.Sprintf("n8n workflow %s failed at node %s: %s", escape(name), escape(orDash(r.Node)), escape(orDash(r.Message)))
	if r.Count > 1 {
		text += fmt.Sprintf(" (%s times)", notify.Thousands(r.Count))
	}
	text += ". Owner: " + mention
	if by != "" {
		text += ", " + by
	}
	text += ". Next step: " + nextStep(r.Runbook)
	return message{Text: fallback(text), Blocks: blocks}
}

func renderKeyUnknown(r *notify.Record, mention, guardURL string) message {
	key, ns := escape(r.Key), escape(r.Namespace)
	why := "its outcome is not known"
	if r.Reason != "" {
		why = reasonText(r.Reason)
	}
	lead := fmt.Sprintf("%s: key `%s` in namespace `%s` is *unknown*: %s (attempt %d", mention, key, ns, why, r.KeyAttempt)
	if r.Holder != "" {
		lead += ", holder “" + escape(r.Holder) + "”"
	}
	lead += "). n8n-guard will not retry it: a person must check whether the side effect happened and resolve the key."
	if r.Message != "" {
		lead += "\n> " + escape(r.Message)
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain("Stuck key needs a person: " + r.Namespace)),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+nextStep(r.Runbook)), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Then resolve it* (`completed` if it took effect, `failed` to let n8n try again):\n```"+
			escape(resolveCommand(guardURL, r.Namespace, r.Key))+"```"), nil, nil),
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn("ref `"+r.ID+"`")))
	blocks = append(blocks, decisionBlocks(r, false)...)
	text := fmt.Sprintf("Key %s/%s is unknown and needs a person. Owner: %s. Next step: %s", ns, key, mention, nextStep(r.Runbook))
	return message{Text: fallback(text), Blocks: blocks}
}

// renderBreaker is the one message of an outage, as it stands: open
// (with the events parked so far), closed and catching up, caught up. A
// breaker closed by a person's reset is said as such: nothing proved the
// destination takes writes again.
func renderBreaker(r *notify.Record, mention string) message {
	head, lead := breakerText(r, mention)
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(head)),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
	}
	if r.Kind == notify.KindBreakerOpened && r.ClosedAt == nil {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*Next step*\n"+breakerNextStep(r)), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn("ref `"+r.ID+"`")))
	return message{Text: fallback(escape(head) + ". Owner: " + mention + "."), Blocks: blocks}
}

// breakerText picks the header and lead for the moment of the outage r
// stands at; the cases are tried in order, so each one says only what
// tells it from those above.
func breakerText(r *notify.Record, mention string) (head, lead string) {
	switch {
	case r.Kind == notify.KindBreakerOpened && r.SupersededAt != nil:
		return breakerSupersededText(r, mention)
	case r.Kind == notify.KindBreakerOpened && r.ClosedAt == nil:
		return breakerOpenHead(r), breakerOpenLead(r, mention)
	case r.Kind == notify.KindBreakerOpened && r.CaughtUpAt == nil:
		return breakerCatchingUpText(r, mention)
	case r.Kind == notify.KindBreakerOpened && r.Parked > 0:
		return breakerCaughtUpText(r, mention)
	case r.Kind == notify.KindBreakerOpened && r.ResetBy != "",
		r.Kind == notify.KindBreakerClosed && r.ResetBy != "":
		return breakerResetText(r, mention)
	default:
		return breakerClosedText(r, mention)
	}
}

// breakerSupersededText hands the rest of the outage to the newer message,
// whether the breaker had closed in between or not.
func breakerSupersededText(r *notify.Record, mention string) (head, lead string) {
	dest, ed := r.Destination, escape(r.Destination)
	again := notify.Clock(*r.SupersededAt)
	if r.ClosedAt != nil {
		head = fmt.Sprintf("%s back, then paused again at %s — see the newer message", dest, notify.ClockUTC(*r.SupersededAt))
		lead = fmt.Sprintf("%s: the circuit breaker of `%s` closed at %s, and opened again (or a maintenance window began) at %s before every parked event was resumed. The events still parked are counted in the newer message.",
			mention, ed, notify.Clock(*r.ClosedAt), again)
	} else {
		head = fmt.Sprintf("%s unreachable — %s (continued in a newer message)", dest, notify.Plural(r.Parked, "event", "events")+" parked")
		lead = fmt.Sprintf("%s: the circuit breaker of `%s` opened at %s; at %s a newer pause began (a maintenance window): the newer message tells the rest.",
			mention, ed, notify.Clock(r.FirstAt), again)
	}
	return head, lead + lostText(r)
}

// breakerOpenHead says the destination is down (or paused for
// maintenance) and what that holds back so far.
func breakerOpenHead(r *notify.Record) string {
	head := r.Destination + " unreachable"
	if r.Reason == "" && strings.HasPrefix(r.Message, "maintenance window") {
		head = r.Destination + " paused for maintenance" // keystore.DecideHoldDestination
	}
	if r.Parked > 0 {
		head += " — " + notify.Plural(r.Parked, "event", "events") + " parked"
	} else if r.ReopensAt != nil {
		head += ", writes paused for " + notify.HumanDuration(r.ReopensAt.Sub(r.FirstAt))
	}
	return head
}

// breakerOpenLead tells why the breaker opened and what happens to writes
// until the probe, since the owner has to decide whether to act.
func breakerOpenLead(r *notify.Record, mention string) string {
	ed := escape(r.Destination)
	lead := fmt.Sprintf("%s: the circuit breaker of destination `%s` opened at %s", mention, ed, notify.Clock(r.FirstAt))
	if r.Reason != "" {
		lead += " (" + escape(r.Reason)
		if r.Message != "" {
			lead += ": " + escape(r.Message)
		}
		lead += ")"
	} else if r.Message != "" {
		lead += " (" + escape(r.Message) + ")"
	}
	lead += ". Reserves naming it park their event in n8n when they carry a `resume_url`, else answer `destination_paused` and record nothing"
	if r.ReopensAt != nil {
		lead += " until " + notify.Clock(*r.ReopensAt) + "; then one parked event (or reservation) goes through as a probe"
	}
	lead += "."
	if r.Parked > 0 {
		lead += fmt.Sprintf(" %s parked so far: they are resumed by themselves, oldest first, once `%s` is back.", notify.Plural(r.Parked, "event is", "events are"), ed)
	}
	return lead + lostText(r)
}

// breakerCatchingUpText is the closed breaker while parked events are
// still being resumed; a reset is said as such, since no probe proved it.
func breakerCatchingUpText(r *notify.Record, mention string) (head, lead string) {
	dest, ed := r.Destination, escape(r.Destination)
	if r.ResetBy != "" {
		head = fmt.Sprintf("%s breaker reset by %s — resuming %s", dest, r.ResetBy, notify.Plural(r.Parked, "parked event", "parked events"))
		lead = fmt.Sprintf("%s: %s reset the circuit breaker of `%s` at %s%s. Writes are let through again, but nothing has shown yet that `%s` takes them; the parked events are resumed oldest first at the destination's pace.",
			mention, escape(r.ResetBy), ed, notify.Clock(*r.ClosedAt), becauseText(r), ed)
	} else {
		head = fmt.Sprintf("%s back — catching up %s", dest, notify.Plural(r.Parked, "parked event", "parked events"))
		lead = fmt.Sprintf("%s: the circuit breaker of `%s` closed at %s: the probe's write went through. The parked events are resumed oldest first at the destination's pace.",
			mention, ed, notify.Clock(*r.ClosedAt))
	}
	if done := r.Parked - r.ParkedLeft - r.ParkedLost; done > 0 && r.ParkedLeft > 0 {
		head += fmt.Sprintf(" (%d resumed so far)", done)
	}
	return head, lead + pausedText(r) + lostText(r)
}

// breakerCaughtUpText is the end of an outage that parked events: how
// many were resumed and how long the catch-up took.
func breakerCaughtUpText(r *notify.Record, mention string) (head, lead string) {
	dest, ed := r.Destination, escape(r.Destination)
	caught := max(r.Parked-r.ParkedLost, 0)
	took := notify.HumanDuration(r.CaughtUpAt.Sub(*r.ClosedAt))
	if r.ResetBy != "" {
		head = fmt.Sprintf("%s: %d of %d parked events resumed in %s after a reset by %s", dest, caught, r.Parked, took, r.ResetBy)
		lead = fmt.Sprintf("%s: %s reset the circuit breaker of `%s` at %s%s; since then %s resumed. Each resumed execution wrote or failed on its own: a new failure opens the breaker again and is a new message.",
			mention, escape(r.ResetBy), ed, notify.Clock(*r.ClosedAt), becauseText(r), notify.Plural(caught, "parked event was", "parked events were"))
	} else {
		head = dest + " back — " + notify.CaughtUp(caught, r.ParkedLost, keystore.CatchUpTook(*r.ClosedAt, *r.CaughtUpAt))
		every := "every event parked during the outage was resumed"
		if r.ParkedLost > 0 {
			every = fmt.Sprintf("%d of the %d events parked during the outage were resumed", caught, r.Parked)
		}
		lead = fmt.Sprintf("%s: the circuit breaker of `%s` closed at %s and %s by %s.",
			mention, ed, notify.Clock(*r.ClosedAt), every, notify.Clock(*r.CaughtUpAt))
	}
	return head, lead + pausedText(r) + lostText(r)
}

// breakerResetText is a breaker a person reset with nothing parked: writes
// flow again, but no probe proved the destination takes them.
func breakerResetText(r *notify.Record, mention string) (head, lead string) {
	ed := escape(r.Destination)
	head = fmt.Sprintf("%s breaker reset by %s (%s paused)", r.Destination, r.ResetBy, notify.Plural(r.PausedReserves, "reserve was", "reserves were"))
	lead = fmt.Sprintf("%s: %s reset the circuit breaker of `%s` at %s%s: writes are let through again, but nothing has shown yet that `%s` takes them.",
		mention, escape(r.ResetBy), ed, notify.Clock(breakerClosedAt(r)), becauseText(r), ed)
	return head, lead + pausedText(r)
}

// breakerClosedText is a breaker closed by a probe with nothing parked.
func breakerClosedText(r *notify.Record, mention string) (head, lead string) {
	head = fmt.Sprintf("%s reachable again (%s paused)", r.Destination, notify.Plural(r.PausedReserves, "reserve was", "reserves were"))
	lead = fmt.Sprintf("%s: the circuit breaker of destination `%s` closed at %s: writes flow again.", mention, escape(r.Destination), notify.Clock(breakerClosedAt(r)))
	return head, lead + pausedText(r)
}

// breakerClosedAt is when the breaker closed; a closed-breaker record
// without ClosedAt closed when it was first seen.
func breakerClosedAt(r *notify.Record) time.Time {
	if r.ClosedAt != nil {
		return *r.ClosedAt
	}
	return r.FirstAt
}

// breakerNextStep is what the owner of a still-open breaker should check:
// their runbook when the destination has one.
func breakerNextStep(r *notify.Record) string {
	if r.Runbook != "" {
		return nextStep(r.Runbook)
	}
	return fmt.Sprintf("Check `%s` (its status page, DNS, credentials, firewall). Nothing to do in n8n-guard: parked events are resumed by themselves once it is back, and this message says when they are caught up.", escape(r.Destination))
}

// becauseText is why a person reset the breaker (" because …"), or ""
// for a reset from before resets had a reason.
func becauseText(r *notify.Record) string {
	if r.ResetReason == "" {
		return ""
	}
	return " because " + escape(r.ResetReason)
}

// pausedText says what happened to reserves that could not park (the
// breaker counts every paused reserve, the parked ones too).
func pausedText(r *notify.Record) string {
	n := r.PausedReserves - r.Parked
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" While it was open, %s without a `resume_url` answered `destination_paused` and wrote nothing: executions that do not retry on their own need a re-run.",
		notify.Plural(n, "reserve", "reserves"))
}

func lostText(r *notify.Record) string {
	if r.ParkedLost == 0 {
		return ""
	}
	return fmt.Sprintf(" %s no longer held by n8n (deleted, pruned or cancelled): the owners of their namespaces were told.",
		notify.Plural(r.ParkedLost, "parked execution was", "parked executions were"))
}

// renderParked is the message about a parked key a person must look at:
// its execution is gone from n8n (lost), or it waited longer than its
// namespace's parked_limit (overdue).
func renderParked(r *notify.Record, mention, guardURL string) message {
	key, ns, dest := escape(r.Key), escape(r.Namespace), escape(r.Destination)
	exec := "its n8n execution"
	if r.WaitingExecution != "" {
		exec = "n8n execution " + escape(r.WaitingExecution)
	}
	where := "destination `" + dest + "`"
	if r.KeyAttempt > 0 {
		where += fmt.Sprintf(", attempt %d", r.KeyAttempt)
	}
	since, waited := "", ""
	if r.ParkedAt != nil {
		since = " since " + parkedSince(*r.ParkedAt, r.FirstAt)
		waited = " for " + notify.HumanDuration(r.FirstAt.Sub(*r.ParkedAt).Truncate(time.Hour))
	}
	var head, lead, next string
	if r.Kind == notify.KindParkedLost {
		head = "Parked event lost in n8n: " + r.Namespace
		lead = fmt.Sprintf("%s: key `%s` in namespace `%s` was parked%s (%s), but %s no longer exists: its resume URL answered that it was deleted, pruned or cancelled. n8n-guard will not resume it, so the event has *not* reached `%s`.",
			mention, key, ns, since, where, exec, dest)
		if keystore.IsWokenSilent(r.Message) {
			lead = fmt.Sprintf("%s: key `%s` in namespace `%s` was parked%s (%s); n8n-guard resumed it and n8n took the call for %s, but the execution died before it reserved the key again (n8n restarted or a worker was lost). n8n-guard will not resume it again, so the event has *not* reached `%s` through the guard.",
				mention, key, ns, since, where, exec, dest)
		}
		if r.Message != "" {
			lead += "\n> " + escape(r.Message)
		}
		next = fmt.Sprintf("Re-send the event from its source (the form, the sender's webhook, the CRM's retry) with the same key once `%s` takes writes again: it is written exactly once. If it already reached `%s` another way or is not wanted, resolve the key instead (`completed`: a later copy writes nothing; `failed`: a later copy goes through):", dest, dest)
	} else {
		head = "Event parked too long: " + r.Namespace
		if since != "" {
			where += ";" + since
		}
		lead = fmt.Sprintf("%s: key `%s` in namespace `%s` has waited parked in %s%s (%s), longer than the namespace's `parked_limit`: `%s` has not taken writes since.",
			mention, key, ns, exec, waited, where, dest)
		next = fmt.Sprintf("Find out why `%s` stays paused: `GET %s/v1/destinations` shows its breaker (reason, maintenance window). Once it is back, the breaker closes after its next probe and the event is resumed by itself. If the event is no longer wanted, resolve the key (`completed`: a later copy writes nothing) and cancel the waiting execution in n8n:", dest, baseURL(guardURL))
	}
	if r.Runbook != "" {
		next = nextStep(r.Runbook) + "\n" + next
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(head)),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+next+"\n```"+escape(resolveCommand(guardURL, r.Namespace, r.Key))+"```"), nil, nil),
	}
	ctx := "ref `" + r.ID + "`"
	if r.Count > 1 {
		what := "were lost in n8n"
		if r.Kind == notify.KindParkedOverdue {
			what = "are parked longer than the limit"
		}
		ctx = fmt.Sprintf("*%s* parked events of `%s` (destination `%s`) %s since %s; list them: `%s` · ",
			notify.Thousands(r.Count), ns, dest, what, notify.Clock(r.FirstAt), escape(parkedListCommand(guardURL, r.Namespace))) + ctx
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn(ctx)))
	if r.ExecutionsURL != "" {
		blocks = append(blocks, slack.NewActionBlock("parked",
			slack.NewButtonBlockElement("open_execution", r.ID, plain("Open executions in n8n")).WithURL(r.ExecutionsURL)))
	}
	text := fmt.Sprintf("%s: key %s/%s (destination %s). Owner: %s.", escape(head), ns, key, dest, mention)
	if r.Count > 1 {
		text += fmt.Sprintf(" (%s keys of %s)", notify.Thousands(r.Count), ns)
	}
	return message{Text: fallback(text), Blocks: blocks}
}

// renderRerunRefused is the message about a re-run a person allowed that
// n8n (or the guard's checks) refused: the person was told the guard
// re-runs the execution, so they hear that it did not, and why.
func renderRerunRefused(r *notify.Record, mention string) message {
	key, ns := escape(r.Key), escape(r.Namespace)
	head := "Re-run not started: " + r.Namespace
	why := escape(r.Message)
	if why == "" {
		why = "(no reason given)"
	}
	lead := fmt.Sprintf("%s: the re-run of key `%s` in `%s` that %s allowed did not start: %s. Nothing was written; the key stays failed.",
		mention, key, ns, allowedBy(r.RerunBy), why)
	next := "Allow it again in the console once the cause is fixed, or let its sender send the event again."
	if r.Runbook != "" {
		next = nextStep(r.Runbook) + "\n" + next
	}
	ctx := "ref `" + r.ID + "`"
	if r.KeyAttempt > 0 {
		ctx = fmt.Sprintf("attempt %d · ", r.KeyAttempt) + ctx
	}
	if r.Count > 1 {
		ctx = fmt.Sprintf("*%s* re-runs in `%s` were not started since %s · ", notify.Thousands(r.Count), ns, notify.Clock(r.FirstAt)) + ctx
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(head)),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+next), nil, nil),
		slack.NewContextBlock("", mrkdwn(ctx)),
	}
	text := fmt.Sprintf("Re-run not started: key %s/%s, allowed by %s: %s. Nothing was written; the key stays failed. Owner: %s.",
		ns, key, allowedBy(r.RerunBy), why, mention)
	if r.Count > 1 {
		text += fmt.Sprintf(" (%s re-runs of %s)", notify.Thousands(r.Count), ns)
	}
	return message{Text: fallback(text), Blocks: blocks}
}

// slackClicker matches the By of a decision taken in Slack
// ("Ana (Slack U123)", decision.Click): that person is mentioned, so they
// hear of it where they clicked.
var slackClicker = regexp.MustCompile(`\(Slack ([UW][A-Z0-9]+)\)$`)

// allowedBy is who allowed a re-run, as mrkdwn.
func allowedBy(by string) string {
	if m := slackClicker.FindStringSubmatch(by); m != nil {
		return "<@" + m[1] + ">"
	}
	if by == "" {
		return "a person"
	}
	return "*" + escape(by) + "*"
}

// renderDamaged is the message about a key whose stored record failed its
// checksum: nothing of the record is trusted, so it names the key, what
// the guard does with it, and the runbook.
func renderDamaged(r *notify.Record, mention string) message {
	key, ns := escape(r.Key), escape(r.Namespace)
	head := "Damaged record: " + r.Namespace
	lead := fmt.Sprintf("%s: the stored record of key `%s` in namespace `%s` failed its checksum. n8n-guard never decides on it: the key answers `record_damaged`, and every listing and the catch-up skip it (the other keys go on).", mention, key, ns)
	next := "Look in the destination whether the event's write happened, then restore or repair the record: docs/runbooks.md, \"A key answers record_damaged\"."
	if r.Runbook != "" {
		next = nextStep(r.Runbook) + "\n" + next
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(head)),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+next), nil, nil),
		slack.NewContextBlock("", mrkdwn("ref `"+r.ID+"`")),
	}
	text := fmt.Sprintf("Damaged record: key %s/%s answers record_damaged. Owner: %s. Runbook: docs/runbooks.md, \"A key answers record_damaged\".", ns, key, mention)
	return message{Text: fallback(text), Blocks: blocks}
}

// parkedSince is when a key parked, with the date when it was not today
// (in the fallback text; Slack's formatting says the date anyway).
func parkedSince(parked, now time.Time) string {
	p, n := parked.UTC(), now.UTC()
	if p.YearDay() == n.YearDay() && p.Year() == n.Year() {
		return notify.Clock(p)
	}
	return notify.SlackDate(p, "{date_short_pretty} {time}", p.Format("Mon 2 Jan 15:04")+" UTC")
}

func parkedListCommand(guardURL, ns string) string {
	return fmt.Sprintf("GET %s/v1/keys?namespace=%s&state=parked", baseURL(guardURL), ns)
}

// atGate says what an execution that stopped at its re-run gate asks of a
// person (rerun.GateNodePrefix): the write failed, nothing was written,
// and the execution waits to be re-run; "" for any other failure.
func atGate(r *notify.Record, canRetry bool) string {
	target, ok := strings.CutPrefix(r.Node, rerun.GateNodePrefix)
	if !ok {
		return ""
	}
	s := "*" + escape(target) + "* failed and nothing was written: the execution waits at its re-run gate. "
	if canRetry {
		return s + "Once the target is back, press *Retry execution*: n8n-guard re-runs it, and the event is written once.\n"
	}
	// Without n8n's API the guard re-runs nothing (501 unsupported): a
	// plain "allow a retry" lets n8n's own retry through the gate.
	return s + "Once the target is back, allow a retry of its key in the n8n-guard console, then press *Retry* on the execution in n8n.\n"
}

func nextStep(runbook string) string {
	if runbook == "" {
		return "No runbook is configured for this: open the execution, find the cause, fix it and re-run (add a runbook to the notify config so the next person knows)."
	}
	return escape(notify.Truncate(runbook, 1500))
}

// fallback is the notification text; Slack limits it to 40,000 characters,
// we keep it short.
func fallback(s string) string { return notify.Truncate(s, 1000) }

func occurrences(r *notify.Record) string {
	if r.Count <= 1 {
		return "Seen once at " + notify.Clock(r.FirstAt)
	}
	return fmt.Sprintf("Seen *%s* times between %s and %s (same workflow, node and error)",
		notify.Thousands(r.Count), notify.Clock(r.FirstAt), notify.Clock(r.LastAt))
}

// resolveCommand is the exact call that resolves a stuck key (contract:
// POST /v1/resolve), ready to paste into a shell.
func resolveCommand(guardURL, ns, key string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Namespace  string `json:"namespace"`
		Key        string `json:"key"`
		Resolution string `json:"resolution"`
		By         string `json:"by"`
		Note       string `json:"note"`
	}{ns, key, "completed", "<your name>", "<what you checked>"})
	return fmt.Sprintf("curl -X POST %s/v1/resolve -H \"Authorization: Bearer $N8N_GUARD_TOKEN\" -H 'Content-Type: application/json' -d %s",
		baseURL(guardURL), shellQuote(strings.TrimSpace(b.String())))
}

func listCommand(guardURL, ns string) string {
	return fmt.Sprintf("GET %s/v1/keys?namespace=%s&state=unknown", baseURL(guardURL), ns)
}

func baseURL(u string) string {
	if u == "" {
		return "$N8N_GUARD_URL"
	}
	return u
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// deadlineText says when a person should act: "by 14:00 UTC", with the
// date when it is not the day of the failure.
func deadlineText(deadline, from time.Time) string {
	d, f := deadline.UTC(), from.UTC()
	if d.YearDay() == f.YearDay() && d.Year() == f.Year() {
		return "by " + notify.SlackDate(d, "{time}", d.Format("15:04")+" UTC")
	}
	return "by " + notify.SlackDate(d, "{date_short_pretty} {time}", d.Format("Mon 2 Jan 15:04")+" UTC")
}

// decisionBlocks are the buttons of a message, or, once a person decided,
// who did what and when (the buttons are gone then). A snooze keeps them:
// someone may still decide.
func decisionBlocks(r *notify.Record, canRetry bool) []slack.Block {
	kind := r.Kind
	if kind == notify.KindEscalation {
		kind = r.EscalatedKind
	}
	var out []slack.Block
	if r.Decision != "" {
		out = append(out, slack.NewSectionBlock(mrkdwn(decisionMark(r.Decision)+" "+notify.DecisionText(r)), nil, nil))
		if r.Acknowledged() {
			return out
		}
	}
	button := func(action, label string, style slack.Style) *slack.ButtonBlockElement {
		b := slack.NewButtonBlockElement(action, decision.ButtonValue(r), plain(label))
		b.Style = style
		return b
	}
	var els []slack.BlockElement
	switch kind {
	case notify.KindKeyUnknown:
		els = append(els,
			button(notify.ActionComplete, "It happened — mark completed", slack.StylePrimary),
			button(notify.ActionRetry, "It did not happen — allow a retry", slack.StyleDanger),
			button(notify.ActionAck, "Leave it to me", slack.StyleDefault))
	case notify.KindApproval:
		els = append(els,
			button(notify.ActionApprove, "Approve", slack.StylePrimary),
			button(notify.ActionReject, "Reject…", slack.StyleDanger))
	case notify.KindWorkflowFailed:
		els = append(els, button(notify.ActionAck, "Acknowledge", slack.StylePrimary))
		if r.Decision != notify.DecisionSnoozed {
			els = append(els, button(notify.ActionSnooze, "Snooze 1 h", slack.StyleDefault))
		}
		if canRetry && r.ExecutionID != "" {
			els = append(els, button(notify.ActionRerun, "Retry execution", slack.StyleDefault))
		}
	}
	if r.ExecutionURL != "" {
		els = append(els, slack.NewButtonBlockElement("open_execution", r.ID, plain("Open execution in n8n")).WithURL(r.ExecutionURL))
	}
	if len(els) > 0 {
		out = append(out, slack.NewActionBlock("decide", els...))
	}
	return out
}

func decisionMark(d string) string {
	switch d {
	case notify.DecisionCompleted:
		return ":white_check_mark:"
	case notify.DecisionRetry:
		return ":leftwards_arrow_with_hook:"
	case notify.DecisionSnoozed:
		return ":zzz:"
	case notify.DecisionRetried:
		return ":repeat:"
	case notify.DecisionApproved:
		return ":white_check_mark:"
	case notify.DecisionRejected:
		return ":no_entry:"
	}
	return ":eyes:"
}

// renderEscalation is the message for the next step of a rule: what is
// waiting, for whom it was first, and the same buttons (acting on the
// original notification).
func renderEscalation(r *notify.Record, mention, guardURL string) message {
	var what string
	switch r.EscalatedKind {
	case notify.KindApproval:
		what = fmt.Sprintf("key `%s` in namespace `%s` *waits for approval* before it is written", escape(r.Key), escape(r.Namespace))
		if r.Summary != "" {
			what += " (" + escape(r.Summary) + ")"
		}
	case notify.KindKeyUnknown:
		what = fmt.Sprintf("key `%s` in namespace `%s` is *unknown* and needs a person", escape(r.Key), escape(r.Namespace))
		if r.Count > 1 {
			what = fmt.Sprintf("*%s* keys of `%s` went *unknown* (the first: `%s`) and need a person", notify.Thousands(r.Count),
				escape(r.Namespace), escape(r.Key))
		}
	case notify.KindWorkflowFailed:
		name := cmp.Or(r.WorkflowName, r.WorkflowID)
		what = fmt.Sprintf("n8n workflow *%s* failed at node %s: %s", escape(name), escape(orDash(r.Node)), escape(orDash(r.Message)))
	default:
		what = "destination `" + escape(r.Destination) + "` needs a person"
	}
	first := "nobody"
	switch {
	case notify.IsUserID(r.Holder):
		first = "<@" + r.Holder + ">"
	case notify.IsGroupID(r.Holder):
		first = "<!subteam^" + r.Holder + ">"
	}
	to := mention
	if r.Owner == "" {
		to = "<!here>"
	}
	lead := fmt.Sprintf("%s: %s. It was for %s and %s.", to, what, first, escape(r.Reason))
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain("Escalated: nobody has taken this yet")),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+nextStep(r.Runbook)), nil, nil),
	}
	if r.EscalatedKind == notify.KindKeyUnknown {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*Or resolve it by hand:*\n```"+
			escape(resolveCommand(guardURL, r.Namespace, r.Key))+"```"), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn("ref `"+r.ID+"` · escalates `"+r.EscalationOf+"`")))
	if r.EscalatedKind == notify.KindKeyUnknown && r.Count > 1 && !r.Acknowledged() {
		// Its buttons act on the group: the same, with their confirmation.
		blocks = append(blocks, groupButtons(r, 0))
	} else {
		blocks = append(blocks, decisionBlocks(r, false)...)
	}
	text := fmt.Sprintf("Escalated to %s: %s (%s).", to, what, escape(r.Reason))
	return message{Text: fallback(text), Blocks: blocks}
}

// approvalFields is what the approvers judge: the summary (when the
// reserve sent one), who asked, the destination the write goes to (its
// state is on the key's console page) and who may approve.
func approvalFields(r *notify.Record, approvers []string) slack.Block {
	var fields []*slack.TextBlockObject
	if r.Summary != "" {
		fields = append(fields, mrkdwn("*Summary*\n"+escape(r.Summary)))
	}
	requester := "not known"
	if r.Message != "" {
		requester = escape(r.Message)
	}
	fields = append(fields, mrkdwn("*Requested by*\n"+requester))
	if r.Destination != "" {
		fields = append(fields, mrkdwn("*Writes to*\n`"+escape(r.Destination)+"`"))
	}
	who := make([]string, 0, len(approvers))
	for _, a := range approvers {
		who = append(who, slackMention(a))
	}
	if len(who) > 0 {
		fields = append(fields, mrkdwn("*Approvers*\n"+strings.Join(who, ", ")))
	}
	return slack.NewSectionBlock(nil, fields, nil)
}

// slackMention writes a configured approver as Slack mentions it: a user
// (U…, W…) or a user group (S…); anything else as escaped text.
func slackMention(id string) string {
	switch {
	case len(id) > 2 && (id[0] == 'U' || id[0] == 'W') && isSlackID(id):
		return "<@" + id + ">"
	case len(id) > 2 && id[0] == 'S' && isSlackID(id):
		return "<!subteam^" + id + ">"
	}
	return escape(id)
}

func isSlackID(id string) bool {
	for _, c := range id {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// renderApproval asks the approvers to approve or reject one event before
// it is written.
func renderApproval(r *notify.Record, mention, guardURL string, approvers []string) message {
	key, ns := escape(r.Key), escape(r.Namespace)
	by := "who triggered it is not known"
	if r.Message != "" {
		by = "requested by " + escape(r.Message)
	}
	lead := fmt.Sprintf("%s: event `%s` in namespace `%s` *waits for your approval* before it is written (%s", mention, key, ns, by)
	if r.Holder != "" {
		lead += "; execution “" + escape(r.Holder) + "”"
	}
	lead += "). Approve: the execution goes on and writes. Reject: it ends without writing, with your reason."
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain("Approval needed: " + r.Namespace)),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
	}
	blocks = append(blocks, approvalFields(r, approvers))
	if r.Runbook != "" {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*What to check*\n"+nextStep(r.Runbook)), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn("ref `"+r.ID+"` · the console: "+escape(baseURL(guardURL)+"/ui/approvals"))))
	blocks = append(blocks, decisionBlocks(r, false)...)
	text := fmt.Sprintf("Approval needed: %s/%s waits for %s (%s).", ns, key, mention, by)
	if r.Summary != "" {
		text = fmt.Sprintf("Approval needed: %s/%s (%s) waits for %s (%s).", ns, key, escape(r.Summary), mention, by)
	}
	return message{Text: fallback(text), Blocks: blocks}
}
