package notify

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
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
func render(r *record, mention, guardURL string) message {
	switch r.Kind {
	case KindKeyUnknown:
		return renderKeyUnknown(r, mention, guardURL)
	case KindEscalation:
		return renderEscalation(r, mention, guardURL)
	case KindBreakerOpened, KindBreakerClosed:
		return renderBreaker(r, mention)
	}
	return renderWorkflowFailed(r, mention)
}

// mrkdwn is verbatim: Slack then parses only the explicit markup we write
// (<@U…>, <url|label>), never a bare "@channel" or URL in payload text.
func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, true)
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, truncate(s, 150), false, false)
}

func field(label, value string) *slack.TextBlockObject {
	return mrkdwn("*" + label + "*\n" + truncate(value, 1900))
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func renderWorkflowFailed(r *record, mention string) message {
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
	wf := escapeMrkdwn(name)
	if r.WorkflowID != "" && r.WorkflowID != name {
		wf += " (`" + escapeMrkdwn(r.WorkflowID) + "`)"
	}
	exec := orDash(escapeMrkdwn(r.ExecutionID))
	if r.RetryOf != "" {
		exec += " (retry of " + escapeMrkdwn(r.RetryOf) + ")"
	}
	errKind := escapeMrkdwn(r.ErrorName)
	if r.HTTPCode != "" {
		errKind = strings.TrimPrefix(errKind+" · HTTP "+escapeMrkdwn(r.HTTPCode), " · ")
	}
	node := escapeMrkdwn(r.Node)
	if r.NodeType != "" {
		node += " (" + escapeMrkdwn(strings.TrimPrefix(r.NodeType, "n8n-nodes-base.")) + ")"
	}
	fields := []*slack.TextBlockObject{
		field("Workflow", wf),
		field("Failed node", orDash(node)),
		field("Mode", orDash(escapeMrkdwn(r.Mode))),
		field("Execution", exec),
		field("Error", orDash(errKind)),
		field("Owner", mention),
	}
	msg := escapeMrkdwn(r.Message)
	if msg == "" {
		msg = "(no error message)"
	}
	errText := "*Error message*\n> " + msg
	if r.Description != "" {
		errText += "\n> " + escapeMrkdwn(r.Description)
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain("n8n workflow failed: " + name)),
		slack.NewSectionBlock(mrkdwn(lead), fields, nil),
		slack.NewSectionBlock(mrkdwn(errText), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+nextStep(r.Runbook)), nil, nil),
		slack.NewContextBlock("", mrkdwn(occurrences(r)+" · ref `"+r.ID+"`")),
	}
	blocks = append(blocks, decisionBlocks(r)...)

	text := fmt.Sprintf("n8n workflow %s failed at node %s: %s", escapeMrkdwn(name), escapeMrkdwn(orDash(r.Node)), escapeMrkdwn(orDash(r.Message)))
	if r.Count > 1 {
		text += fmt.Sprintf(" (%s times)", thousands(r.Count))
	}
	text += ". Owner: " + mention
	if by != "" {
		text += ", " + by
	}
	text += ". Next step: " + nextStep(r.Runbook)
	return message{Text: fallback(text), Blocks: blocks}
}

func renderKeyUnknown(r *record, mention, guardURL string) message {
	key, ns := escapeMrkdwn(r.Key), escapeMrkdwn(r.Namespace)
	why := "its outcome is not known"
	if r.Reason == "lease_expired" {
		why = "its lease ran out before the holder reported an outcome"
	} else if r.Reason != "" {
		why = "the holder reported " + escapeMrkdwn(r.Reason)
	}
	lead := fmt.Sprintf("%s: key `%s` in namespace `%s` is *unknown*: %s (attempt %d", mention, key, ns, why, r.KeyAttempt)
	if r.Holder != "" {
		lead += ", holder “" + escapeMrkdwn(r.Holder) + "”"
	}
	lead += "). n8n-guard will not retry it: a person must check whether the side effect happened and resolve the key."
	if r.Message != "" {
		lead += "\n> " + escapeMrkdwn(r.Message)
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain("Stuck key needs a person: " + r.Namespace)),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+nextStep(r.Runbook)), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Then resolve it* (`completed` if it took effect, `failed` to let n8n try again):\n```"+
			escapeMrkdwn(resolveCommand(guardURL, r.Namespace, r.Key))+"```"), nil, nil),
	}
	ctx := "ref `" + r.ID + "`"
	if r.Count > 1 {
		ctx = fmt.Sprintf("*%s* keys of `%s` went unknown since %s; list them: `%s` · ",
			thousands(r.Count), ns, clock(r.FirstAt), escapeMrkdwn(listCommand(guardURL, r.Namespace))) + ctx
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn(ctx)))
	if r.Count > 1 && r.Decision == "" {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(fmt.Sprintf(
			"The first two buttons decide key `%s` only; resolve the others from the list. \"Leave it to me\" takes the whole group.", key)), nil, nil))
	}
	blocks = append(blocks, decisionBlocks(r)...)
	text := fmt.Sprintf("Key %s/%s is unknown and needs a person. Owner: %s. Next step: %s", ns, key, mention, nextStep(r.Runbook))
	if r.Count > 1 {
		text += fmt.Sprintf(" (%s keys of %s went unknown)", thousands(r.Count), ns)
	}
	return message{Text: fallback(text), Blocks: blocks}
}

func renderBreaker(r *record, mention string) message {
	dest := r.Destination
	var head, lead string
	if r.Kind == KindBreakerOpened {
		pause := ""
		if r.ReopensAt != nil {
			pause = ", writes paused for " + humanDuration(r.ReopensAt.Sub(r.FirstAt))
		}
		head = dest + " unreachable" + pause
		lead = fmt.Sprintf("%s: the circuit breaker of destination `%s` opened at %s", mention, escapeMrkdwn(dest), clock(r.FirstAt))
		if r.Reason != "" {
			lead += " (" + escapeMrkdwn(r.Reason)
			if r.Message != "" {
				lead += ": " + escapeMrkdwn(r.Message)
			}
			lead += ")"
		}
		lead += ". Reserves naming it answer `destination_paused` and record nothing"
		if r.ReopensAt != nil {
			lead += " until " + clock(*r.ReopensAt) + "; then one reservation goes through as a probe"
		}
		lead += "."
	} else {
		head = fmt.Sprintf("%s reachable again (%s paused)", dest, plural(r.PausedReserves, "reserve was", "reserves were"))
		lead = fmt.Sprintf("%s: the circuit breaker of destination `%s` closed at %s: writes flow again. While it was open, %s answered `destination_paused` and wrote nothing: executions that do not retry on their own need a re-run.",
			mention, escapeMrkdwn(dest), clock(r.FirstAt), plural(r.PausedReserves, "reserve", "reserves"))
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(head)),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
	}
	if r.Kind == KindBreakerOpened {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*Next step*\n"+nextStep(r.Runbook)), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn("ref `"+r.ID+"`")))
	return message{Text: fallback(escapeMrkdwn(head) + ". Owner: " + mention + "."), Blocks: blocks}
}

func nextStep(runbook string) string {
	if runbook == "" {
		return "No runbook is configured for this: open the execution, find the cause, fix it and re-run (add a runbook to the notify config so the next person knows)."
	}
	return escapeMrkdwn(truncate(runbook, 1500))
}

// fallback is the notification text; Slack limits it to 40,000 characters,
// we keep it short.
func fallback(s string) string { return truncate(s, 1000) }

func occurrences(r *record) string {
	if r.Count <= 1 {
		return "Seen once at " + clock(r.FirstAt)
	}
	return fmt.Sprintf("Seen *%s* times between %s and %s (same workflow, node and error)",
		thousands(r.Count), clock(r.FirstAt), clock(r.LastAt))
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
		return "by " + d.Format("15:04") + " UTC"
	}
	return "by " + d.Format("Mon 2 Jan 15:04") + " UTC"
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }

func humanDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "a moment"
	case d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour", "hours")
	case d >= time.Minute && d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	case d >= time.Minute:
		return strconv.Itoa(int((d+30*time.Second)/time.Minute)) + " min"
	}
	return strconv.Itoa(int((d+time.Second-1)/time.Second)) + " s"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}

// thousands writes 10000 as "10,000": the exact count, readable.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// decisionBlocks are the buttons of a message, or, once a person decided,
// who did what and when (the buttons are gone then). A snooze keeps them:
// someone may still decide.
func decisionBlocks(r *record) []slack.Block {
	kind := r.Kind
	if kind == KindEscalation {
		kind = r.EscalatedKind
	}
	var out []slack.Block
	if r.Decision != "" {
		out = append(out, slack.NewSectionBlock(mrkdwn(decisionMark(r.Decision)+" "+decisionText(r)), nil, nil))
		if r.acknowledged() {
			return out
		}
	}
	button := func(action, label string, style slack.Style) *slack.ButtonBlockElement {
		b := slack.NewButtonBlockElement(action, r.ID, plain(label))
		b.Style = style
		return b
	}
	var els []slack.BlockElement
	switch kind {
	case KindKeyUnknown:
		els = append(els,
			button(ActionComplete, "It happened — mark completed", slack.StylePrimary),
			button(ActionRetry, "It did not happen — allow a retry", slack.StyleDanger),
			button(ActionAck, "Leave it to me", slack.StyleDefault))
	case KindWorkflowFailed:
		els = append(els, button(ActionAck, "Acknowledge", slack.StylePrimary))
		if r.Decision != DecisionSnoozed {
			els = append(els, button(ActionSnooze, "Snooze 1 h", slack.StyleDefault))
		}
		if r.canRetry && r.ExecutionID != "" {
			els = append(els, button(ActionRerun, "Retry execution", slack.StyleDefault))
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
	case DecisionCompleted:
		return ":white_check_mark:"
	case DecisionRetry:
		return ":leftwards_arrow_with_hook:"
	case DecisionSnoozed:
		return ":zzz:"
	case DecisionRetried:
		return ":repeat:"
	}
	return ":eyes:"
}

// renderEscalation is the message for the next step of a rule: what is
// waiting, for whom it was first, and the same buttons (acting on the
// original notification).
func renderEscalation(r *record, mention, guardURL string) message {
	var what string
	switch r.EscalatedKind {
	case KindKeyUnknown:
		what = fmt.Sprintf("key `%s` in namespace `%s` is *unknown* and needs a person", escapeMrkdwn(r.Key), escapeMrkdwn(r.Namespace))
	case KindWorkflowFailed:
		name := cmpOr(r.WorkflowName, r.WorkflowID)
		what = fmt.Sprintf("n8n workflow *%s* failed at node %s: %s", escapeMrkdwn(name), escapeMrkdwn(orDash(r.Node)), escapeMrkdwn(orDash(r.Message)))
	default:
		what = "destination `" + escapeMrkdwn(r.Destination) + "` needs a person"
	}
	first := "nobody"
	switch {
	case userIDRE.MatchString(r.Holder):
		first = "<@" + r.Holder + ">"
	case groupIDRE.MatchString(r.Holder):
		first = "<!subteam^" + r.Holder + ">"
	}
	to := mention
	if r.Owner == "" {
		to = "<!here>"
	}
	lead := fmt.Sprintf("%s: %s. It was for %s and %s.", to, what, first, escapeMrkdwn(r.Reason))
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain("Escalated: nobody has taken this yet")),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
		slack.NewSectionBlock(mrkdwn("*Next step*\n"+nextStep(r.Runbook)), nil, nil),
	}
	if r.EscalatedKind == KindKeyUnknown {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*Or resolve it by hand:*\n```"+
			escapeMrkdwn(resolveCommand(guardURL, r.Namespace, r.Key))+"```"), nil, nil))
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn("ref `"+r.ID+"` · escalates `"+r.EscalationOf+"`")))
	blocks = append(blocks, decisionBlocks(r)...)
	text := fmt.Sprintf("Escalated to %s: %s (%s).", to, what, escapeMrkdwn(r.Reason))
	return message{Text: fallback(text), Blocks: blocks}
}
