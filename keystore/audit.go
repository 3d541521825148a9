package keystore

// EventQuery asks the event log for its newest events first: those with
// Seq below Before (0: from the newest), of the given kinds (none: every
// kind), at most Limit (outside 1..MaxEvents: MaxEvents). The console's
// audit list reads people's decisions with it.
type EventQuery struct {
	Before uint64
	Kinds  []EventKind
	Limit  int
}

// DecisionKinds are the events a person's decision writes: a key resolved
// (Owner names who), an approval decided (Owner, and "approved" or
// "rejected" in Message) and a breaker reset (its Message, "reset by …";
// a breaker closed by a probe that got through names nobody), and a
// maintenance window set (a breaker_opened naming who; an outage's names
// nobody) or ended early (MaintenanceOf).
var DecisionKinds = []EventKind{EventKeyResolved, EventApprovalDecided, EventBreakerClosed, EventBreakerOpened, EventMaintenanceEnded}
