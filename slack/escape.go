package slack

import escaping "github.com/n8n-guard/n8n-guard/slack/mrkdwn"

// escape makes text from a payload, a person or n8n inert in the mrkdwn
// this package writes. The escaping is slack's own (package mrkdwn, which
// notify's replies use too).
func escape(s string) string { return escaping.Escape(s) }
