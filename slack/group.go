package slack

import (
	"fmt"

	"github.com/slack-go/slack"

	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/decision"
)

// renderKeyGroup is the one message of many stuck keys of a namespace: how
// many are still open, and buttons that decide every open key at once
// (each behind a confirmation that names the count) until none is open.
func renderKeyGroup(r *notify.Record, mention, guardURL string, links []notify.Link) message {
	ns := escape(r.Namespace)
	open := r.OpenKeys()
	lead := fmt.Sprintf("%s: *%s* keys of `%s` went unknown between %s and %s (the first: `%s`",
		mention, notify.Thousands(r.Count), ns, notify.Clock(r.FirstAt), notify.Clock(r.LastAt), escape(r.Key))
	if r.Reason != "" {
		lead += ", " + reasonText(r.Reason)
	}
	lead += "). n8n-guard will not retry them: a person must check whether their side effects happened and decide them."
	progress := fmt.Sprintf("*%s of %s still open.*", notify.Thousands(open), notify.Thousands(r.Count))
	if open == 0 {
		progress = fmt.Sprintf(":white_check_mark: *All %s keys are decided.*", notify.Thousands(r.Count))
	}
	if r.Decision != "" {
		progress += "\n" + decisionMark(r.Decision) + " " + notify.GroupDecisionText(r)
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(fmt.Sprintf("Stuck keys need a person: %s (%s)", r.Namespace, notify.Thousands(r.Count)))),
		slack.NewSectionBlock(mrkdwn(lead), nil, nil),
		slack.NewSectionBlock(mrkdwn(progress), nil, nil),
	}
	if open > 0 {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*Next step*\n"+nextStep(r.Runbook)), nil, nil))
	}
	ctx := "ref `" + r.ID + "`"
	if len(links) == 0 {
		ctx = "list them: `" + escape(listCommand(guardURL, r.Namespace)) + "` · " + ctx
	}
	blocks = append(blocks, slack.NewContextBlock("", mrkdwn(ctx)))
	if open > 0 {
		blocks = append(blocks, groupButtons(r, open))
	}
	text := fmt.Sprintf("%s keys of %s went unknown; %s still open. Owner: %s.", notify.Thousands(r.Count), ns, notify.Thousands(open), mention)
	return message{Text: fallback(text), Blocks: blocks}
}

// groupButtons decide every open key of the group; Slack asks the person
// to confirm with the count first (open 0: not known here, as on an
// escalation message: "every open key of the 700").
func groupButtons(r *notify.Record, open int) slack.Block {
	n, count := notify.Plural(open, "key", "keys"), notify.Thousands(open)
	if open == 0 {
		n, count = "open keys of the "+notify.Thousands(r.Count), "all open"
	}
	button := func(action, label string, style slack.Style, confirmTitle, confirmText, yes string) *slack.ButtonBlockElement {
		b := slack.NewButtonBlockElement(action, decision.ButtonValue(r), plain(label))
		b.Style = style
		if confirmTitle != "" {
			c := slack.NewConfirmationBlockObject(plain(confirmTitle), mrkdwn(confirmText), plain(yes), plain("Cancel"))
			if style == slack.StyleDanger {
				c = c.WithStyle(slack.StyleDanger)
			}
			b = b.WithConfirm(c)
		}
		return b
	}
	els := []slack.BlockElement{
		button(notify.ActionComplete, "All open: it happened", slack.StylePrimary,
			fmt.Sprintf("Decide all %s as completed?", n),
			fmt.Sprintf("Each of the %s of `%s` still unknown is marked *completed* (it happened; a later copy writes nothing). A key decided meanwhile is left as it is.",
				n, escape(r.Namespace)),
			"Mark "+count+" completed"),
		button(notify.ActionRetry, "All open: it did not happen", slack.StyleDanger,
			fmt.Sprintf("Decide all %s as not happened?", n),
			fmt.Sprintf("Each of the %s of `%s` still unknown is marked *failed*: n8n may try it again. A key decided meanwhile is left as it is.",
				n, escape(r.Namespace)),
			"Allow "+count+" retries"),
	}
	if !r.Acknowledged() {
		els = append(els, button(notify.ActionAck, "Leave it to me", slack.StyleDefault, "", "", ""))
	}
	return slack.NewActionBlock("decide", els...)
}

// linkBlock is the message's buttons to the console (none without a
// public URL).
func linkBlock(links []notify.Link) []slack.Block {
	if len(links) == 0 {
		return nil
	}
	els := make([]slack.BlockElement, 0, len(links))
	for i, l := range links {
		els = append(els, slack.NewButtonBlockElement(fmt.Sprintf("open_console_%d", i), "", plain(l.Label)).WithURL(l.URL))
	}
	return []slack.Block{slack.NewActionBlock("console", els...)}
}
