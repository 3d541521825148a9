package keystore

import (
	"strings"
	"time"
)

// Words: what a key's state, stage and reason say to a person, and the
// next step a person takes, written once for every door. The console's
// pages, the CLI's listings and Slack's messages read them here, so one
// key reads the same wherever a person looks at it (words_test.go, and
// cmd/n8n-guard's test that reads a key on the console and in the CLI).
// The codes stay the contract's (state, reason, history event); the words
// stand beside them and may change without breaking a client.
//
// Only keystore decides what a key's stage is (wordsStage); an adapter
// adds how to act at its own door (a link, a command), never a second
// reading of the fields.

// KeyWords is one key in words.
type KeyWords struct {
	// Stage is where the key stands within its state, as a code: a
	// parked phase (PhaseWith), or StageWordsOverdue for a parked key
	// waiting past its namespace's parked_limit, or a re-run stage of a
	// failed key (at_gate, granted, starting, started, refused). "" when
	// its state says it all.
	Stage string
	// Status says the state and stage in a few words, as a list shows it.
	Status string
	// Reason says the key's reason ("" : it has none).
	Reason string
	// Next is the next step a person takes ("" : the guard names none,
	// e.g. a completed key).
	Next string
	// Attention: a person must act for the key to move on (unknown, lost,
	// overdue, awaiting approval, waiting at a re-run gate or refused).
	Attention bool
}

// WordsAt is what a key's words depend on besides its record.
type WordsAt struct {
	// Breaker is the breaker of the key's destination (nil: none, or not
	// read): with it a claimed key that is the breaker's probe reads so.
	Breaker *Breaker
	// ParkedLimit is the key's namespace's parked_limit (0: not known to
	// the caller: then a parked key is overdue only once the guard has
	// recorded it so, HistoryParkedOverdue).
	ParkedLimit time.Duration
	Now         time.Time
}

// StageWordsOverdue is the stage code of a parked key that waits past its
// namespace's parked_limit for its destination or its woken execution:
// somebody must look, not wait.
const StageWordsOverdue = "overdue"

// The re-run stages as words.go names them: the stored stage's codes.
const (
	rerunAtGate   = string(StageAtGate)
	rerunGranted  = string(StageGranted)
	rerunStarting = string(StageStarting)
	rerunStarted  = string(StageStarted)
	rerunRefused  = string(StageRefused)
)

// wordsStage is the one place words.go reads a key's stage from: the
// stored stage (StageOf for a record that came without one, such as an
// older guard's answer), a claimed key told as the probe of br.
func wordsStage(r *Record, br *Breaker) string {
	if r == nil {
		return ""
	}
	st := r.Stage
	if st == "" {
		st = StageOf(r)
	}
	if st == PhaseClaimed && br != nil && br.isProbe(r.Namespace, r.Key) {
		return string(PhaseProbe)
	}
	return string(st)
}

// WordsOf says r in words.
func WordsOf(r *Record, at WordsAt) KeyWords {
	if r == nil {
		return KeyWords{Status: "never seen (or purged)"}
	}
	w := KeyWords{Stage: wordsStage(r, at.Breaker), Reason: reasonWordsOf(r.Reason)}
	if w.Stage == string(PhaseWaiting) || w.Stage == string(PhaseClaimed) || w.Stage == string(PhaseProbe) || w.Stage == string(PhaseResumed) {
		if parkedOverdue(r, at.ParkedLimit, at.Now) {
			w.Stage = StageWordsOverdue
		}
	}
	if s, ok := stageWords[w.Stage]; ok && w.Stage != "" {
		w.Status, w.Next, w.Attention = s.status, s.next, s.attention
		return w
	}
	switch r.State {
	case StateReserved:
		w.Status = "reserved: an execution holds its lease"
	case StateCompleted:
		w.Status = "completed"
	case StateFailed:
		w.Status = "failed for good: no new attempt"
		if r.Retryable {
			w.Status = "failed: a new attempt may start"
			w.Next = "Nothing to do: the guard re-sends nothing itself; the event is written when its sender sends it again, or a person re-runs its n8n execution."
		}
	case StateUnknown:
		w.Status, w.Attention = "unknown: a person must decide", true
		w.Next = "Check in the destination whether the event arrived; then decide: mark completed, allow a retry (the sender or a re-run sends it again) or mark failed for good. The guard does not retry it by itself."
	default:
		w.Status = strings.ReplaceAll(string(r.State), "_", " ")
	}
	return w
}

// parkedOverdue: the parked key's event has waited limit or longer, or
// the guard recorded it overdue in this wait (limit 0: only the latter).
func parkedOverdue(r *Record, limit time.Duration, now time.Time) bool {
	since := r.WaitingSince()
	if since == nil {
		return false
	}
	if limit > 0 && now.Sub(*since) >= limit {
		return true
	}
	for _, h := range r.History {
		if h.Event == HistoryParkedOverdue && !h.At.Before(*since) {
			return true
		}
	}
	return false
}

type stageText struct {
	status, next string
	attention    bool
}

// stageWords: the words of each stage.
var stageWords = map[string]stageText{
	string(PhaseWaiting): {status: "waiting for the destination",
		next: "Nothing to do: it is resumed when the destination is back."},
	string(PhaseClaimed): {status: "being resumed",
		next: "Nothing to do: a guard is calling its resume URL; the execution then runs again and reserves the key."},
	string(PhaseProbe): {status: "being resumed as the probe",
		next: "Nothing to do: its write tests whether the destination is back; the other parked events follow when it completes."},
	string(PhaseResumed): {status: "resumed",
		next: "Waiting for the execution after its resume: n8n took the call; the execution runs again and reserves the key."},
	string(PhaseLost): {status: "lost", attention: true,
		next: "n8n no longer holds the execution (deleted, pruned or cancelled), so it will not be resumed. Check in the destination whether the event arrived; then decide: mark completed, allow a retry (the sender or a re-run sends it again) or mark failed for good."},
	string(PhaseAwaitingApproval): {status: "awaiting approval", attention: true,
		next: "Waiting for a person's approval: approve it (its execution writes) or reject it (it ends without writing)."},
	string(PhaseApproved): {status: "approved",
		next: "Approved: the guard resumes its execution, which writes once the destination takes writes (after a maintenance window or an open breaker)."},
	string(PhaseRejected): {status: "rejected",
		next: "Rejected: the guard resumes its execution so that it ends without writing."},
	StageWordsOverdue: {status: "overdue", attention: true,
		next: "Parked longer than its namespace's parked_limit: check why the destination is not back (its breaker and maintenance window), and that n8n still holds the execution."},
	rerunAtGate: {status: "waiting at its re-run gate", attention: true,
		next: "Check whether the event reached the destination; once the destination is back, allow a retry and re-run the execution: the guard asks n8n to retry it, and the event is written once."},
	rerunGranted: {status: "re-run allowed",
		next: "Nothing to do: the guard asks n8n to re-run the execution, which reserves the key again."},
	rerunStarting: {status: "asking n8n to re-run it",
		next: "Nothing to do: the guard is asking n8n to re-run the execution, which reserves the key again."},
	rerunStarted: {status: "re-run started in n8n",
		next: "Nothing to do: the re-run reserves the key again."},
	rerunRefused: {status: "re-run refused by n8n", attention: true,
		next: "The re-run did not start (n8n's answer is in the history): fix its cause, then allow the re-run again, or decide the key otherwise."},
}

// ReasonWords says what a reason means for the person on call.
func ReasonWords(r Reason) string {
	if r == "" {
		return "no reason given"
	}
	return reasonWordsOf(r)
}

func reasonWordsOf(r Reason) string {
	switch r {
	case "":
		return ""
	case ReasonOutcomeUnknown:
		return "outcome unknown (the write timed out or its answer was lost)"
	case ReasonLeaseExpired:
		return "the execution stopped without reporting (its lease ran out)"
	case ReasonDestinationUnreachable:
		return "destination unreachable"
	case ReasonDestinationFailed:
		return "the destination refused the write"
	case ReasonValidationFailed:
		return "the event was invalid"
	case ReasonResumeLost:
		return "n8n no longer holds the parked execution"
	}
	return strings.ReplaceAll(string(r), "_", " ")
}

// ReasonShort is a reason in a few words (a phone's, a group's).
func ReasonShort(r Reason) string {
	switch r {
	case ReasonLeaseExpired:
		return "lease ran out"
	case ReasonDestinationFailed:
		return "destination refused"
	case "":
		return "no reason"
	}
	return strings.ReplaceAll(string(r), "_", " ")
}

// HistoryWords says what a history entry means ("": the entry reads as
// its code).
func HistoryWords(t Transition) string {
	switch t.Event {
	case HistoryRerunGate:
		return "stopped at its re-run gate"
	case HistoryRerunGranted:
		return "re-run allowed"
	case HistoryRerunStarting:
		return "asking n8n to re-run it"
	case HistoryRerunStarted:
		return "re-run started in n8n as execution " + t.Detail
	case HistoryRerunRefused:
		return "n8n refused the re-run"
	}
	return ""
}

// BreakerWords says a breaker's state as the lists read it at now; b is
// the breaker as its View shows it then. "probing" only while a probe is
// in flight (ProbeInFlight).
func BreakerWords(b Breaker, now time.Time) string {
	switch {
	case b.State == BreakerOpen && b.Maintenance != nil:
		return "paused: maintenance window"
	case b.State == BreakerOpen:
		return "paused: breaker open"
	case b.State == BreakerHalfOpen && b.ProbeInFlight(now):
		return "probing: one write tests it"
	case b.State == BreakerHalfOpen:
		return "paused: the next write or parked event is the probe"
	case len(b.Views) > 0:
		// Open for some namespaces alone (breaker_view.go): the caller
		// keeps the views its reader may see; a view without a namespace
		// is told without its name.
		names := make([]string, 0, len(b.Views))
		for _, v := range b.Views {
			names = append(names, v.Namespace)
		}
		if len(names) == 0 || names[0] == "" {
			return "taking writes; namespaces whose own writes failed are paused alone"
		}
		return "taking writes; paused for " + strings.Join(names, ", ") + " only (its own writes failed)"
	}
	return "taking writes"
}

// SkipWords says why a bulk decision left keys alone (the Skip codes of
// bulk.go), for the console's bulk page and the CLI's keys bulk alike.
func SkipWords(why string) string {
	switch why {
	case SkipLiveLease:
		return "an attempt holds a live lease"
	case SkipAwaitingApproval:
		return "awaiting approval (approve or reject them)"
	case SkipCompleted:
		return "completed (not reopened)"
	case SkipParkedWaiting:
		return "parked, their n8n execution waits for the guard's resume call (decide one alone with force, and stop its execution in n8n)"
	case SkipDecided:
		return "already decided this way"
	case SkipChanged:
		return "changed meanwhile"
	case SkipNoRerunGate:
		return "no execution waits at a re-run gate: its sender sends it again"
	case SkipDamaged:
		return "record damaged (see the runbook)"
	}
	return "a resolution does not apply"
}
