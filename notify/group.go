package notify

import (
	"github.com/n8n-guard/n8n-guard/slack/mrkdwn"

	"fmt"
	"time"
)

// A group of stuck keys: keys of one namespace going unknown inside the
// group window make one message, its head, whose Count says how many. The
// outbox keeps the group's keys (Member) beside the head, so one decision
// reaches every key of the group, and marks each key once when it is
// decided (by the group's buttons or anywhere else): Settled counts them,
// and the message keeps its buttons while any key is open. Pure functions,
// as in transitions.go:
//
//	a key of the group decided (keySettled; once per key, the outbox marks it):
//	  group, keys still open  -> settled+1, update within half a window (the buttons stay valid)
//	  group, the last key     -> settled+1, final state shown now, escalation ends
//	  one key (count 1)       -> settled+1, as resolvedElsewhere
//	a group's complete|retry (groupClick, then groupDecided):
//	  keys open               -> decided: every open key is resolved, the decision shown, buttons stay while any is open
//	  none open (late click)  -> nothing ("all decided already")
//	  stale button            -> nothing ("out of date")

// Member is one key of a group of stuck keys, as the outbox keeps it.
type Member struct {
	Namespace string
	Key       string
	Attempt   int
	// Settled: the key was decided after it went unknown (by anyone).
	Settled bool
}

// GroupProgress is how far the keys of a group are decided, and the last
// decision taken for the whole group.
type GroupProgress struct {
	Settled int `json:"settled,omitempty"` // keys of the group decided since, by anyone
	// BulkID names the last group decision in each key's history;
	// BulkDecided and BulkSkipped say how many keys it decided and how many
	// it found decided already.
	BulkID      string `json:"bulk_id,omitempty"`
	BulkDecided int    `json:"bulk_decided,omitempty"`
	BulkSkipped int    `json:"bulk_skipped,omitempty"`
}

// IsKeyGroup reports a message about more than one stuck key.
func (r *Record) IsKeyGroup() bool { return r.Kind == KindKeyUnknown && r.Count > 1 }

// OpenKeys is how many keys of the message are not decided yet.
func (r *Record) OpenKeys() int { return max(r.Count-r.Settled, 0) }

// keySettled records that one key of cur's group was decided (completed:
// marked completed, else failed) by by at at. The outbox calls it once per
// key (Outbox.Settle). window is the group window: progress is shown at
// its pace, as a group's count.
func keySettled(cur *Record, completed bool, by string, at, now time.Time, window time.Duration) *Record {
	x := cur.clone()
	x.Settled = min(x.Settled+1, max(x.Count, 1))
	if !cur.IsKeyGroup() {
		return resolvedElsewhere(x, completed, by, at, now)
	}
	delivered := x.Status == StatusDelivered && x.SlackTS != ""
	if x.OpenKeys() == 0 {
		x.EscalateAt = nil // nobody more needs to hear
		x.Version++
		if delivered {
			x.DueAt = now
		}
		return x
	}
	// The version stays: a button shown a moment ago still decides the
	// keys that are open when it is pressed.
	if delivered && x.DueAt.IsZero() {
		x.DueAt = later(now, x.LastSentAt.Add(window/2))
	}
	return x
}

// groupDecided records a decision user took for the whole group of cur:
// bulk names it in the keys' history, decided keys took it, skipped ones
// were decided already. Escalation ends (a person took the group on); the
// buttons stay while keys are open (keys may still join the group).
func groupDecided(cur *Record, decision, user, bulk string, decided, skipped int, now time.Time) *Record {
	x := decide(cur, decision, user, "", now, false)
	x.BulkID, x.BulkDecided, x.BulkSkipped = bulk, decided, skipped
	return x
}

// GroupDecisionText says the last group decision: "<@U> marked 48 keys
// *completed* (it happened) at … (2 were decided already)".
func GroupDecisionText(r *Record) string {
	who := "<@" + r.DecidedBy + ">"
	if r.DecidedBy == "" {
		who = mrkdwn.Escape(r.DecidedByName)
	}
	at := ""
	if r.DecidedAt != nil {
		at = " at " + Clock(*r.DecidedAt)
	}
	if r.BulkID == "" {
		return DecisionText(r) // not a group decision: one key's, or taken elsewhere
	}
	what := "*acknowledged* the group" + at + " and is on it"
	switch r.Decision {
	case DecisionCompleted:
		what = "marked " + Plural(r.BulkDecided, "key", "keys") + " *completed* (it happened)" + at
	case DecisionRetry:
		what = "*allowed a retry* of " + Plural(r.BulkDecided, "key", "keys") + " (it did not happen)" + at
	case DecisionSnoozed:
		return DecisionText(r)
	}
	if r.BulkSkipped > 0 {
		what += fmt.Sprintf(" (%s decided elsewhere already)", Plural(r.BulkSkipped, "key was", "keys were"))
	}
	return who + " " + what
}
