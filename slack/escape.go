package slack

import (
	"github.com/n8n-guard/n8n-guard/keystore"
	escaping "github.com/n8n-guard/n8n-guard/slack/mrkdwn"
)

// escape makes text from a payload, a person or n8n inert in the mrkdwn
// this package writes. The escaping is slack's own (package mrkdwn, which
// notify's replies use too).
func escape(s string) string { return escaping.Escape(s) }

// reasonText is a key's reason as a message says it: keystore's words
// (those the console and the CLI show), then the code a person searches
// the console or the API for.
func reasonText(reason string) string {
	return escape(keystore.ReasonWords(keystore.Reason(reason))) + " (`" + escape(reason) + "`)"
}
