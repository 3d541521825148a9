package keystore

import "time"

// A key parked longer than its namespace's parked_limit is told to its
// owner once per wait (parkings in a row count as one, Record.ParkedSince):
// the catch-up runner finds it, and the
// store records the report in the key's history together with the event,
// so neither a restart nor a second guard reports it again.
//
//	waiting since WaitingSince, over the limit, not reported -> parked + history parked_overdue, event parked_overdue
//	reported already, under the limit, lost, moved on   -> nothing

// EventParkedOverdue: a key stayed parked longer than its namespace's
// parked_limit; its owner should look at the destination.
const EventParkedOverdue EventKind = "parked_overdue"

// HistoryParkedOverdue marks the report of an overdue parked attempt.
const HistoryParkedOverdue HistoryEvent = "parked_overdue"

// DecideParkedOverdue decides the report of the key parked at parkedAt
// (the runner's view of it) when its event has waited limit or longer at
// now, counted from its first parking in a row (Record.WaitingSince).
func DecideParkedOverdue(cur *Record, parkedAt time.Time, limit time.Duration, now time.Time) (Step, bool) {
	if cur == nil || cur.State != StateParked || cur.ParkedAt == nil || !cur.ParkedAt.Equal(parkedAt) ||
		cur.Reason == ReasonResumeLost {
		return Step{}, false
	}
	// The event's wait: from its first parking in a row, so that parking
	// anew in a rolling outage neither hides it nor reports it again.
	since := *cur.WaitingSince()
	if now.Sub(since) < limit {
		return Step{}, false
	}
	for _, h := range cur.History {
		if h.Event == HistoryParkedOverdue && !h.At.Before(since) {
			return Step{}, false
		}
	}
	next := cur.Clone()
	next.UpdatedAt = now
	waited := now.Sub(since).Truncate(time.Minute)
	next.addHistory(Transition{At: now, Event: HistoryParkedOverdue, Attempt: cur.Attempt,
		Detail: "parked for " + waited.String() + ", limit " + limit.String()})
	ev := Event{At: now, Kind: EventParkedOverdue, Namespace: cur.Namespace, Key: cur.Key, Attempt: cur.Attempt,
		Owner: cur.Owner, Destination: cur.Destination, Message: "parked since " + since.UTC().Format(time.RFC3339)}
	return Step{Record: next, Events: []Event{ev}, Result: Result{Outcome: OutcomeParked, Record: next}}, true
}
