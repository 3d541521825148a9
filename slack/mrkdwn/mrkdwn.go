// Package mrkdwn is how text becomes Slack's mrkdwn: the escaping that
// makes text from a payload, a person or n8n inert in a message. It is
// package slack's, kept apart only so that notify, which writes some of
// the replies slack posts, can escape without importing slack (slack
// imports notify). It imports nothing of the service.
package mrkdwn

import "strings"

// escaper replaces the three characters Slack gives a meaning in mrkdwn
// (https://api.slack.com/reference/surfaces/formatting#escaping): with
// them escaped no mention, link or channel reference can be injected
// through an error message or a name.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Escape makes s inert in Slack mrkdwn.
func Escape(s string) string { return escaper.Replace(s) }
