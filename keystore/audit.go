package keystore

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// EventQuery asks the event log for its newest events first: those with
// Seq below Before (0: from the newest), of the given kinds (none: every
// kind), of bulk action Bulk when set, at most Limit (outside
// 1..MaxEvents: MaxEvents). The console's audit list reads people's
// decisions with it.
type EventQuery struct {
	Before uint64
	Kinds  []EventKind
	Bulk   string
	Limit  int
}

// DecisionKinds are the events a person's decision writes: a key resolved
// (Owner names who; Bulk the bulk action, if any), an approval decided
// (Owner, and "approved" or "rejected" in Message) and a breaker reset
// (its Message, "reset by …"; a breaker closed by a probe that got
// through names nobody), and a maintenance window set (a breaker_opened
// naming who; an outage's names nobody) or ended early (MaintenanceOf).
var DecisionKinds = []EventKind{EventKeyResolved, EventApprovalDecided, EventBreakerClosed, EventBreakerOpened, EventMaintenanceEnded, EventFailureDecided}

// EventFailureDecided: a person acknowledged, snoozed or retried a failed
// execution n8n's error workflow reported (notify keeps the failure and
// its decision; the event log keeps who decided, for the audit, as for
// every other decision). Owner is who, Message the decision
// ("acknowledged", "snoozed", "retried") and Summary what failed, in words
// (the workflow, node and execution, and whether its Slack message was
// delivered). No namespace and no key: failures are not kept by either,
// so only a reader of every namespace sees it (as the failures' page).
// notify writes no notification for it.
const EventFailureDecided EventKind = "failure_decided"

// DecisionRecorder is the part of Store that writes a decision taken
// outside the keys and breakers (a failed execution acknowledged) to the
// event log, for the audit.
type DecisionRecorder interface {
	// RecordDecision appends ev (EventFailureDecided; At is the store's
	// now) to the event log.
	RecordDecision(ctx context.Context, ev Event) error
}

// RecordDecision implements DecisionRecorder: a decision on no key (the
// driver finds no record under the empty namespace and key, and writes
// the event alone, as a breaker decision writes its events).
func (o *Operations) RecordDecision(ctx context.Context, ev Event) error {
	if ev.Kind != EventFailureDecided {
		return errs.Errorf(errs.InvalidRequest, "only a decision on a failed execution (%s) is recorded outside the keys, not %q", EventFailureDecided, ev.Kind)
	}
	if ev.Owner == "" || ev.Message == "" || ev.Namespace != "" || ev.Key != "" {
		return errs.Errorf(errs.InvalidRequest, "a recorded decision names who (owner) and what (message), and no key; nothing written")
	}
	ev.Owner, ev.Summary = truncate(ev.Owner, MaxByLength), truncate(ev.Summary, 500)
	_, err := o.Driver.DecideKey(ctx, Op{Name: "record a decision",
		Decide: func(_ *Record, _ *Breaker, now time.Time) (Step, error) {
			ev.At = now
			return Step{Events: []Event{ev}}, nil
		}})
	return err
}

// AuditEntry is one decision of the audit: one event of DecisionKinds, or
// every key_resolved event of one bulk action taken together.
type AuditEntry struct {
	Event // the newest event of the entry
	// Keys is how many keys the bulk action (Event.Bulk) decided, as its
	// events in the log count them; 0 for a single decision.
	Keys int
	// Namespaces counts Keys by namespace, so a reader limited to some
	// namespaces is shown only the keys of its own (nil for a single
	// decision).
	Namespaces map[string]int
	// Action is what the store keeps under Event.Bulk (who, the note, the
	// resolution); nil when it keeps nothing under it.
	Action *BulkAction
}

// AuditReader is the part of Store the audit reads.
type AuditReader interface {
	RecentEvents(ctx context.Context, q EventQuery) ([]Event, error)
	BulkActions(ctx context.Context, ids []string) (map[string]BulkAction, error)
}

// Audit returns up to limit decisions with events below before (0: from
// the newest), newest first, and the before of the next page (0: none).
// A bulk action is one entry, at its newest event, however many keys it
// decided: the events of a bulk already on the page are counted into its
// entry, and the page reads on past limit until an event that would begin
// a new entry. So a bulk is split over two pages only when another
// decision was written between its keys exactly where a page ends.
func Audit(ctx context.Context, s AuditReader, before uint64, limit int) (entries []AuditEntry, next uint64, err error) {
	bulks := map[string]int{} // bulk id -> its entry
	for {
		evs, err := s.RecentEvents(ctx, EventQuery{Before: before, Kinds: DecisionKinds, Limit: MaxEvents})
		if err != nil {
			return nil, 0, err
		}
		for _, ev := range evs {
			bulk := ev.Kind == EventKeyResolved && ev.Bulk != ""
			if i, ok := bulks[ev.Bulk]; bulk && ok {
				entries[i].Keys++
				entries[i].Namespaces[ev.Namespace]++
				continue
			}
			if len(entries) == limit {
				next = ev.Seq + 1
				return entries, next, addActions(ctx, s, entries, bulks)
			}
			e := AuditEntry{Event: ev}
			if bulk {
				e.Keys, e.Namespaces, bulks[ev.Bulk] = 1, map[string]int{ev.Namespace: 1}, len(entries)
			}
			entries = append(entries, e)
		}
		if len(evs) < MaxEvents {
			return entries, 0, addActions(ctx, s, entries, bulks)
		}
		before = evs[len(evs)-1].Seq
	}
}

// addActions gives each bulk's entry what the store keeps about it.
func addActions(ctx context.Context, s AuditReader, entries []AuditEntry, bulks map[string]int) error {
	if len(bulks) == 0 {
		return nil
	}
	ids := make([]string, 0, len(bulks))
	for id := range bulks {
		ids = append(ids, id)
	}
	kept, err := s.BulkActions(ctx, ids)
	if err != nil {
		return err
	}
	for id, i := range bulks {
		if a, ok := kept[id]; ok {
			entries[i].Action = &a
		}
	}
	return nil
}
