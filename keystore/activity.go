package keystore

import "time"

// HourActivity counts, for one hour, what the guard answered and what
// went wrong: the console's chart of the last day. Stores keep these
// counts next to the keys, written in the same transaction as the decision
// they count, so the chart comes from the store of truth.
type HourActivity struct {
	Hour      time.Time // start of the hour, UTC
	Accepted  int       // reserves answered accepted
	Duplicate int       // reserves answered duplicate_event
	Failed    int       // attempts reported failed
	Unknown   int       // keys that went unknown (fail outcome_unknown, lease ran out)
}

// ActivityHours is how far back activity is kept.
const ActivityHours = 48
