package decision

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// Click is one button press, from Slack's interactivity (HTTP or Socket
// Mode; the slack package checks and decodes it).
type Click struct {
	Action string
	// Value is the button's value (ButtonValue: the notification, the key
	// attempt and the version it was rendered for).
	Value    string
	UserID   string // U…
	UserName string
	Channel  string // where the message is, for an ephemeral answer
	// TriggerID lets the guard open a modal in answer (Reject asks for
	// the reason); Note is what such a modal's form sent.
	TriggerID string
	Note      string
}

// by names the person who clicked in a key's history.
func (c Click) by() string {
	return notify.Truncate(fmt.Sprintf("%s (Slack %s)", cmpOr(c.UserName, "Slack user"), c.UserID), keystore.MaxByLength)
}

// ButtonValue is the value of r's buttons: the notification, the key
// attempt and the version they are rendered for, so a late click on an
// older message changes nothing.
func ButtonValue(r *notify.Record) string {
	return r.ID + "|" + strconv.Itoa(r.KeyAttempt) + "|" + strconv.Itoa(r.Version+1)
}

// parseButtonValue reads a ButtonValue; a bare ID (the buttons of earlier
// versions) gives attempt and version 0: not checked.
func parseButtonValue(v string) (id string, attempt, version int) {
	id, rest, ok := strings.Cut(v, "|")
	if !ok {
		return v, 0, 0
	}
	a, vv, _ := strings.Cut(rest, "|")
	attempt, _ = strconv.Atoi(a)
	version, _ = strconv.Atoi(vv)
	return id, attempt, version
}

// What a click asks for, decided from the notification as it stands
// (pure: the record is never changed here; notify's transitions record
// the decision).
//
//	a click (decideClick):
//	  ack|snooze       -> acknowledged|snoozed unless already taken
//	  complete|retry   -> completed|retry (key messages only; the key is resolved first)
//	  rerun            -> retried (failures only; n8n retried it first)
//	  stale button     -> nothing ("out of date")
//	a group's complete|retry (groupClick): every open key, or nothing when none is open or the button is out of date

// clickStep is what a click asks for: the decision to record, or why
// nothing changes (Refusal, answered to the person alone).
type clickStep struct {
	Decision string
	Refusal  string
}

// decideClick decides what action does to target (the notification the
// buttons act on); canRetry: n8n's API is configured. The side effect a
// decision needs (resolving the key, retrying the execution) comes after
// it and before decide records it.
func decideClick(target *notify.Record, action string, canRetry bool) clickStep {
	switch action {
	case notify.ActionRerun:
		if !canRetry || target.Kind != notify.KindWorkflowFailed || target.ExecutionID == "" {
			return clickStep{Refusal: "This n8n-guard cannot retry executions (N8N_API_URL and N8N_API_KEY are not set); nothing changed."}
		}
		if target.Decision == notify.DecisionRetried {
			return clickStep{Refusal: fmt.Sprintf("Already retried: %s. Nothing changed.", notify.DecisionText(target))}
		}
		return clickStep{Decision: notify.DecisionRetried}
	case notify.ActionComplete, notify.ActionRetry:
		if target.Kind != notify.KindKeyUnknown {
			return clickStep{Refusal: "This message is not about a key; nothing changed."}
		}
		return clickStep{Decision: map[string]string{notify.ActionComplete: notify.DecisionCompleted, notify.ActionRetry: notify.DecisionRetry}[action]}
	case notify.ActionAck, notify.ActionSnooze:
		if target.Acknowledged() {
			return clickStep{Refusal: fmt.Sprintf("Already taken: %s. Nothing changed.", notify.DecisionText(target))}
		}
		return clickStep{Decision: map[string]string{notify.ActionAck: notify.DecisionAcknowledged, notify.ActionSnooze: notify.DecisionSnoozed}[action]}
	}
	return clickStep{Refusal: "n8n-guard does not know this button; nothing changed."}
}

// stale reports a click on a button rendered for another key attempt or
// an older version of the notification (0: the button did not say, as
// buttons of earlier versions of the guard).
func stale(target *notify.Record, attempt, version int) bool {
	return (attempt != 0 && target.Kind == notify.KindKeyUnknown && attempt != target.KeyAttempt) ||
		(version != 0 && version != target.Version+1)
}

// groupClick decides what a group's "it happened" / "it did not happen"
// does: every open key gets the decision, or nothing when none is open
// (a late click) or the button is out of date.
func groupClick(target *notify.Record, action string, version int) clickStep {
	if target.OpenKeys() == 0 {
		return clickStep{Refusal: fmt.Sprintf("All %s keys of this group are decided already; nothing changed.", notify.Thousands(target.Count))}
	}
	if version != 0 && version != target.Version+1 {
		return clickStep{Refusal: "This message is out of date (the group was decided since it was shown); nothing changed."}
	}
	switch action {
	case notify.ActionComplete:
		return clickStep{Decision: notify.DecisionCompleted}
	case notify.ActionRetry:
		return clickStep{Decision: notify.DecisionRetry}
	}
	return clickStep{Refusal: "n8n-guard does not know this button; nothing changed."}
}

// cmpOr is a unless it is blank, else b (notify's rule for names).
func cmpOr(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}
