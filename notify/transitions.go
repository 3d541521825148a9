package notify

import (
	"fmt"
	"time"
)

// The life cycle of a notification. Every function here is pure: it reads
// the stored record (never changing it) and the event, and returns the
// next record and what the caller does besides saving. The worker, the
// click handler and the escalation step call them inside Outbox.Update or
// Outbox.Escalate, on the record as stored.
//
//	after a Slack call (afterCall), status pending|delivered:
//	  ok               -> delivered (post) | same (update); due again if the count grew or a decision came meanwhile
//	  transient        -> same, attempt+1, due after backoff | dead once RetryFor passed (an update: gives up, stays delivered)
//	  rate limited     -> same, due after Retry-After (attempts not counted)
//	  permanent        -> dead (post) | delivered, not due (update)
//	  unreachable      -> a post that may have landed is marked uncertain; else nothing
//	  canceled         -> nothing
//	after a click (notify/decision's decideClick, then decide):
//	  ack|snooze       -> acknowledged|snoozed unless already taken
//	  complete|retry   -> completed|retry (key messages only; the key is resolved first)
//	  rerun            -> retried (failures only; n8n retried it first)
//	  stale button     -> nothing ("out of date")
//	decided elsewhere (resolvedElsewhere): undecided|snoozed|acknowledged -> completed|retry, escalation ends
//	at an escalation step (atEscalation):
//	  acknowledged     -> escalation ends
//	  snoozed          -> undecided, reminder to the owner, next step after its gap
//	  undecided        -> step+1, message to the step's target | escalation ends after the last
//	resend (resend):   dead -> pending, attempts start over, routed by the current configuration
//	an outage (breaker_opened message, one per outage, edited in place):
//	  parked count seen (parkedSeen): open -> parked = most seen, update within half a window
//	                                  closed, none left -> caught up, update now; closed, fewer left -> progress, within half a window
//	  parked key lost (parkedLostSeen): open|closed -> lost+1, update within half a window
//	  breaker closed (breakerClosed): open -> closed (by the probe, or reset by a person), update now;
//	                                  nothing parked -> caught up at once
//	  breaker opened again (outageSuperseded): open|closed -> superseded, update now (a new message follows)
//	  caught up, superseded, or an event folded in before (its seq) -> nothing

// callResult is what one Slack call for a notification came to.
type callResult struct {
	Update    bool // a chat.update of a delivered message (else a post)
	Class     Class
	Wait      time.Duration // rate limited: how long (0: not said)
	Reason    string        // "method: Slack's reason"
	MaybeSent bool          // unreachable, but a post may have landed
	Channel   string        // where a post landed
	TS        string
}

// deliveryPolicy is what afterCall needs of the configuration.
type deliveryPolicy struct {
	GroupWindow time.Duration
	RetryFor    time.Duration
	// Backoff is the wait before attempt n+1 (exponential with jitter).
	Backoff func(attempt int) time.Duration
}

// callEffect says what afterCall did, for the worker's log and metrics.
type callEffect int

const (
	effectNone          callEffect = iota // nothing to record
	effectUncertain                       // a post may have landed: search before posting again
	effectDelivered                       // Slack accepted the post
	effectShown                           // Slack accepted the update
	effectRateLimited                     // due again after the wait
	effectRetry                           // due again after backoff
	effectDead                            // given up: the notification is dead
	effectUpdateRefused                   // Slack refused the update for good: the message keeps what it showed
	effectUpdateGaveUp                    // updates failed for longer than RetryFor
)

// defaultRateWait applies when Slack says "rate limited" without a
// Retry-After.
const defaultRateWait = 30 * time.Second

// afterCall records the result of the Slack call made for sent on the
// stored record cur. Only an answer of Slack changes a notification: when
// Slack was not reached nothing is marked but that a post may have landed.
// next is nil when nothing is to be saved.
func afterCall(cur, sent *Record, res callResult, now time.Time, p deliveryPolicy) (next *Record, e callEffect) {
	x := cur.clone()
	switch res.Class {
	case classCanceled:
		return nil, effectNone
	case ClassUnreachable:
		if res.Update || !res.MaybeSent {
			return nil, effectNone
		}
		if !x.PostUncertain { // the first such post is the one to look for
			x.PostUncertain, x.UncertainAt = true, now
		}
		return x, effectUncertain
	case ClassRateLimited:
		wait := res.Wait
		if wait <= 0 {
			wait = defaultRateWait
		}
		x.DueAt = later(x.DueAt, now.Add(wait))
		x.LastFailure = fmt.Sprintf("%s: rate limited by Slack, retry after %s", res.Reason, wait)
		return x, effectRateLimited
	case classOK:
		e = effectShown
		if !res.Update {
			e = effectDelivered
			x.Attempts = sent.Attempts + 1 // the post that went through counts
			x.Status, x.SlackChannel, x.SlackTS = StatusDelivered, res.Channel, res.TS
			t := now
			x.DeliveredAt = &t
			x.PostUncertain, x.UncertainAt = false, time.Time{}
		}
		x.LastSentAt, x.ShownCount, x.UpdateFailures, x.LastFailure = now, sent.Count, 0, ""
		x.DueAt = time.Time{}
		if x.Count > x.ShownCount { // intake raised the count during the call
			x.DueAt = now.Add(p.GroupWindow / 2)
		}
		if x.Settled != sent.Settled && x.DueAt.IsZero() { // a key of the group decided during the call
			x.DueAt = now.Add(p.GroupWindow / 2)
		}
		if x.Decision != sent.Decision || x.Version != sent.Version { // a decision during the call
			x.DueAt = now
		}
		return x, e
	case ClassPermanent:
		x.DueAt, x.LastFailure = time.Time{}, res.Reason
		if res.Update {
			return x, effectUpdateRefused
		}
		x.Attempts, x.Status = sent.Attempts+1, StatusDead // the refused post counts
		return x, effectDead
	}
	// Transient.
	attempts, since := sent.Attempts+1, sent.CreatedAt
	if sent.ResentAt != nil {
		since = *sent.ResentAt
	}
	if res.Update {
		attempts, since = sent.UpdateFailures+1, sent.LastSentAt
	}
	x.LastFailure = res.Reason
	if now.Sub(since) >= p.RetryFor {
		x.DueAt = time.Time{}
		if res.Update {
			x.UpdateFailures = attempts
			return x, effectUpdateGaveUp
		}
		x.Attempts, x.Status = attempts, StatusDead
		return x, effectDead
	}
	if res.Update {
		x.UpdateFailures = attempts
	} else {
		x.Attempts = attempts
	}
	x.DueAt = now.Add(p.Backoff(attempts))
	return x, effectRetry
}

// The buttons of a message (their action_id); the value names the
// notification, the key attempt and the version it was rendered for (see
// ButtonValue).
const (
	ActionComplete = "guard_complete" // unknown key: it happened
	ActionRetry    = "guard_retry"    // unknown key: it did not happen
	ActionAck      = "guard_ack"      // leave it to me / acknowledge
	ActionSnooze   = "guard_snooze"   // failure: remind in snoozeFor
	ActionRerun    = "guard_rerun"    // failure: retry the execution in n8n
)

// snoozeFor is how long "Snooze 1 h" holds escalation back.
const snoozeFor = time.Hour

// decide records a decision taken with the buttons by user on cur, the
// notification or one of its escalations (escalation: only its message
// changes). The message is updated in place.
func decide(cur *Record, decision, user, retriedAs string, now time.Time, escalation bool) *Record {
	x := cur.clone()
	t := now
	x.Decision, x.DecidedBy, x.DecidedByName, x.DecidedAt, x.SnoozedUntil, x.RetriedAs = decision, user, "", &t, nil, retriedAs
	x.Version++
	if decision == DecisionSnoozed {
		until := now.Add(snoozeFor)
		x.SnoozedUntil = &until
	}
	if x.Status == StatusDelivered && x.SlackTS != "" {
		x.DueAt = now // chat.update shows the decision in place
	}
	if !escalation {
		x.EscalateAt = nil
		if decision == DecisionSnoozed {
			until := now.Add(snoozeFor)
			x.EscalateAt = &until
		}
	}
	return x
}

// resolvedElsewhere records that the key of cur was decided without its
// buttons (API, console, CLI, another message): escalation stops and the
// message shows who decided (the buttons go). completed: the key is
// completed (else failed, a retry allowed).
func resolvedElsewhere(cur *Record, completed bool, by string, at, now time.Time) *Record {
	x := cur.clone()
	x.EscalateAt = nil
	if x.Decision == DecisionCompleted || x.Decision == DecisionRetry {
		return x // decided already: the first decider stays
	}
	decision := DecisionRetry
	if completed {
		decision = DecisionCompleted
	}
	x.Decision, x.DecidedBy, x.DecidedByName, x.DecidedAt, x.SnoozedUntil = decision, "", cmpOr(by, "someone outside Slack"), &at, nil
	x.Version++
	if x.Status == StatusDelivered && x.SlackTS != "" {
		x.DueAt = now
	}
	return x
}

// EscalationStep is one step of an escalation.
type EscalationStep struct {
	After time.Duration
	To    string
}

// stepTaken says what atEscalation did.
type stepTaken int

const (
	stepNone      stepTaken = iota // escalation over (acknowledged, or no step left)
	stepReminder                   // the snooze is over: the owner is reminded
	stepEscalated                  // the next step's target hears
)

// atEscalation moves cur, whose escalation is due, to its next step under
// steps (the rule's, from the current configuration) and returns the
// message for it (nil: none).
func atEscalation(cur *Record, steps []EscalationStep, now time.Time) (next, msg *Record, taken stepTaken) {
	x := cur.clone()
	if x.Acknowledged() {
		x.EscalateAt = nil
		return x, nil, stepNone
	}
	if x.Decision == DecisionSnoozed {
		// The snooze is over: the message gets its buttons back and the
		// owner a reminder; the next step follows after its usual gap,
		// counted from now.
		x.Decision, x.DecidedBy, x.DecidedAt, x.SnoozedUntil = "", "", nil, nil
		x.Version++
		if x.Status == StatusDelivered && x.SlackTS != "" {
			x.DueAt = now
		}
		x.EscalateAt = nil
		if i := x.EscalationStep; i < len(steps) {
			gap := steps[i].After
			if i > 0 {
				gap -= steps[i-1].After
			}
			t := now.Add(gap)
			x.EscalateAt = &t
		}
		return x, escalationOf(x, now, x.Owner, x.Channel, "the snooze is over"), stepReminder
	}
	if x.EscalationStep >= len(steps) {
		x.EscalateAt = nil
		return x, nil, stepNone
	}
	st := steps[x.EscalationStep]
	x.EscalationStep++
	x.EscalateAt = nil
	if x.EscalationStep < len(steps) {
		t := later(now, x.FirstAt.Add(steps[x.EscalationStep].After))
		x.EscalateAt = &t
	}
	owner, channel := st.To, x.Channel
	if channelIDRE.MatchString(st.To) {
		owner, channel = "", st.To
	}
	return x, escalationOf(x, now, owner, channel, "nobody acknowledged it for "+HumanDuration(now.Sub(x.FirstAt))), stepEscalated
}

// escalationOf is a new message about r (which it adds to r's
// escalations) for owner in channel. Its buttons act on r.
func escalationOf(r *Record, now time.Time, owner, channel, why string) *Record {
	c := r.clone()
	e := &Record{Header: c.Header, Decided: c.Decided, Failure: c.Failure, KeyPayload: c.KeyPayload, Breaker: c.Breaker}
	e.ID, e.Kind, e.Status, e.EscalationOf, e.EscalatedKind = newID(now), KindEscalation, StatusPending, r.ID, r.Kind
	e.Owner, e.Channel, e.Reason = owner, channel, why
	e.Holder = r.Owner // whom it was for first
	e.Group, e.GroupEnd = "", time.Time{}
	e.CreatedAt, e.DueAt = now, now
	e.EventSeq = 0
	r.Escalations = append(r.Escalations, e.ID)
	return e
}

// resend queues a dead notification again (attempts start over) to
// where it goes now: to, the route under the current configuration (the
// cause was often a channel fixed in the config since). ok is false when
// cur is not dead.
func resend(cur *Record, now time.Time, to Target) (next *Record, ok bool) {
	if cur.Status != StatusDead {
		return cur, false
	}
	x := cur.clone()
	t := now
	x.Status, x.Attempts, x.UpdateFailures, x.DueAt, x.ResentAt = StatusPending, 0, 0, now, &t
	if x.Channel != to.Channel {
		// A post that may have landed landed in the old channel: the new
		// one has nothing to look for.
		x.PostUncertain, x.UncertainAt = false, time.Time{}
	}
	x.Owner, x.Channel, x.Runbook = to.Owner, to.Channel, to.Runbook
	x.LastFailure = "resent by an operator after: " + x.LastFailure
	return x, true
}

// outageOpen reports a breaker message whose outage is not over: the
// breaker has not closed, or the events parked during it are not all
// resumed yet.
func (r *Record) outageOpen() bool {
	return r.Kind == KindBreakerOpened && r.CaughtUpAt == nil && r.SupersededAt == nil
}

// outageSuperseded records that the breaker opened again at at (seq)
// before the outage of cur was over: its message says so and a new one
// tells the rest.
func outageSuperseded(cur *Record, seq uint64, at, now time.Time) *Record {
	if !cur.outageOpen() || seq <= cur.OutageSeq {
		return nil
	}
	x := cur.clone()
	t := at
	x.SupersededAt, x.OutageSeq = &t, seq
	x.Version++
	if x.Status == StatusDelivered && x.SlackTS != "" {
		x.DueAt = now
	}
	return x
}

// parkedSeen records that n events of the outage's destination wait
// parked at now. While the breaker is open the message shows the most
// seen, updated at most every half window (as a group's count); once it
// closed, none left means caught up, shown at once. next is nil when
// nothing changes.
func parkedSeen(cur *Record, n int, now time.Time, window time.Duration) *Record {
	if !cur.outageOpen() {
		return nil
	}
	x := cur.clone()
	switch {
	case n > cur.Parked:
		x.Parked = n
		if cur.ClosedAt != nil {
			x.ParkedLeft = n
		}
		showSoon(x, now, window)
	case cur.ClosedAt != nil && n == 0:
		x.ParkedLeft = 0
		caughtUp(x, now)
	case cur.ClosedAt != nil && n != cur.ParkedLeft:
		x.ParkedLeft = n // the catch-up's progress
		showSoon(x, now, window)
	default:
		return nil
	}
	return x
}

// parkedLostSeen records that n8n no longer held one parked execution of
// the outage (the key's owner hears of it in its own message); seq is the
// keystore event, folded in once. An outage already caught up takes it
// too: a woken execution found silent after the bound (or by a restarted
// guard's sweep) was lost, not resumed, and the closing line must say so.
func parkedLostSeen(cur *Record, seq uint64, now time.Time, window time.Duration) *Record {
	if cur.Kind != KindBreakerOpened || cur.SupersededAt != nil || seq <= cur.OutageSeq {
		return nil
	}
	x := cur.clone()
	x.ParkedLost++
	x.OutageSeq = seq
	showSoon(x, now, window)
	return x
}

// breakerClosed records that the outage's breaker closed at at: by the
// probe's success (resetBy empty: the destination took a write) or by a
// person's reset (resetBy: nothing proved it is back). parked is the
// count of events parked at the close (0: none, so nothing to catch up).
func breakerClosed(cur *Record, seq uint64, resetBy string, paused, parked int, at, now time.Time) *Record {
	if cur.Kind != KindBreakerOpened || cur.ClosedAt != nil || seq <= cur.OutageSeq {
		return nil
	}
	x := cur.clone()
	t := at
	x.ClosedAt, x.ResetBy, x.PausedReserves, x.OutageSeq = &t, resetBy, paused, seq
	x.Parked, x.ParkedLeft = max(x.Parked, parked), parked
	if parked == 0 {
		caughtUp(x, at)
	}
	x.Version++
	if x.Status == StatusDelivered && x.SlackTS != "" {
		x.DueAt = now
	}
	return x
}

// catchUpReported records the end of the outage's catch-up as the
// catch-up reported it (keystore.EventCaughtUp, seq): caught up took
// after the breaker's close, the figure of the guard's log line. The
// first report is taken, also after the parked counts showed none left
// (their look may come first: its time gives way to the report's).
func catchUpReported(cur *Record, seq uint64, took time.Duration, now time.Time) *Record {
	if cur.Kind != KindBreakerOpened || cur.SupersededAt != nil || cur.ClosedAt == nil || cur.CatchUpSeq != 0 || seq <= cur.OutageSeq {
		return nil
	}
	x := cur.clone()
	x.CatchUpSeq, x.OutageSeq, x.ParkedLeft = seq, seq, 0
	x.CaughtUpAt = nil
	caughtUp(x, cur.ClosedAt.Add(max(took, 0)))
	if x.Status == StatusDelivered && x.SlackTS != "" {
		x.DueAt = now
	}
	return x
}

func caughtUp(x *Record, now time.Time) {
	t := now
	x.CaughtUpAt = &t
	x.Version++
	if x.Status == StatusDelivered && x.SlackTS != "" {
		x.DueAt = now
	}
}

// showSoon schedules the update of a delivered message that changed, at
// most every half window (Join's pace); a pending post shows it anyway.
// The version moves, so a change during a Slack call is shown after it.
func showSoon(x *Record, now time.Time, window time.Duration) {
	x.Version++
	if x.Status == StatusDelivered && x.SlackTS != "" && x.DueAt.IsZero() {
		x.DueAt = later(now, x.LastSentAt.Add(window/2))
	}
}
