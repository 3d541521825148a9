package notify

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/slack/mrkdwn"
)

// The words of the domain a person reads, in Slack mrkdwn: who decided
// what, when. The slack package renders the rest.

// DecisionText says who did what, when.
func DecisionText(r *Record) string {
	who := "<@" + r.DecidedBy + ">"
	if r.DecidedBy == "" {
		who = mrkdwn.Escape(r.DecidedByName)
	}
	at := ""
	if r.DecidedAt != nil {
		at = " at " + Clock(*r.DecidedAt)
	}
	switch r.Decision {
	case DecisionCompleted:
		return who + " marked it *completed* (it happened)" + at
	case DecisionRetry:
		return who + " *allowed a retry* (it did not happen)" + at
	case DecisionAcknowledged:
		return who + " *acknowledged* it" + at + " and is on it"
	case DecisionRetried:
		if r.RetriedAs == "" { // the execution waited at its re-run gate: the guard re-runs it (rerun.go)
			return who + " *allowed a re-run* of the execution" + at + "; n8n-guard asks n8n to retry it"
		}
		return who + " *retried the execution* in n8n" + at + " (new execution " + mrkdwn.Escape(r.RetriedAs) + ")"
	case DecisionApproved:
		return who + " *approved* it" + at
	case DecisionRejected:
		return who + " *rejected* it" + at
	case DecisionSnoozed:
		until := ""
		if r.SnoozedUntil != nil {
			until = " until " + Clock(*r.SnoozedUntil)
		}
		return who + " *snoozed* it" + until + at
	}
	return ""
}

// Clock is a time as Slack messages show it: Slack's own date formatting,
// so each reader sees it in their time zone ("Today 11:04:05 AM"), with
// the UTC time as the text for clients that cannot format it. Only for
// mrkdwn; plain text (a header) takes ClockUTC.
func Clock(t time.Time) string {
	u := t.UTC()
	return SlackDate(u, "{date_short_pretty} {time_secs}", u.Format("2006-01-02 15:04:05")+" UTC")
}

// ClockUTC is a time of day in plain text, where Slack formats nothing.
func ClockUTC(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }

// SlackDate is Slack's date formatting token for t: format is Slack's
// ({date_short_pretty}, {time}, …), fallback the text shown where Slack
// cannot format it.
func SlackDate(t time.Time, format, fallback string) string {
	return fmt.Sprintf("<!date^%d^%s|%s>", t.Unix(), format, fallback)
}

// HumanDuration is a duration as a person says it.
func HumanDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "a moment"
	case d%time.Hour == 0:
		return Plural(int(d/time.Hour), "hour", "hours")
	case d >= time.Minute && d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	case d >= time.Minute:
		return strconv.Itoa(int((d+30*time.Second)/time.Minute)) + " min"
	}
	return strconv.Itoa(int((d+time.Second-1)/time.Second)) + " s"
}

// Plural is "1 one" or "n many".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Thousands(n) + " " + many
}

// Thousands writes 10000 as "10,000": the exact count, readable.
func Thousands(n int) string {
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

// IsUserID, IsGroupID: a Slack user (U…, W…) or user group (S…) ID.
func IsUserID(s string) bool  { return userIDRE.MatchString(s) }
func IsGroupID(s string) bool { return groupIDRE.MatchString(s) }

func cmpOr(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// CaughtUp is the closing line of a catch-up (keystore.CaughtUp): the
// outage's message says what the catch-up's log line says.
func CaughtUp(resumed, lost int, took time.Duration) string {
	return keystore.CaughtUp(resumed, lost, took)
}
