package keystore

import (
	"sync"
	"time"
)

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

// Activity kinds, as stores count them.
type ActivityKind uint8

const (
	ActivityNone ActivityKind = iota
	ActivityAccepted
	ActivityDuplicate
	ActivityFailed
	ActivityUnknown
)

// ActivityOf says what writing next over prev (nil: a new key) counts as
// on the chart: a new attempt (accepted), a reported failure, or a key
// that went unknown. A person's resolution counts as none of them.
func ActivityOf(prev, next *Record) ActivityKind {
	switch {
	case next.State == StateReserved && (prev == nil || prev.State != StateReserved || prev.Attempt != next.Attempt):
		return ActivityAccepted
	case next.State == StateUnknown && (prev == nil || prev.State != StateUnknown):
		return ActivityUnknown
	case next.State == StateFailed && prev != nil && prev.State != StateFailed && !resolvedNow(prev, next):
		return ActivityFailed
	}
	return ActivityNone
}

func resolvedNow(prev, next *Record) bool {
	return next.ResolvedAt != nil && (prev.ResolvedAt == nil || !prev.ResolvedAt.Equal(*next.ResolvedAt))
}

// Add counts one more of kind.
func (h *HourActivity) Add(kind ActivityKind, n int) {
	switch kind {
	case ActivityAccepted:
		h.Accepted += n
	case ActivityDuplicate:
		h.Duplicate += n
	case ActivityFailed:
		h.Failed += n
	case ActivityUnknown:
		h.Unknown += n
	}
}

// DuplicateTally counts duplicate_event answers per hour in memory. They
// are decided without a write, so a store adds the tally to its file with
// its next sweep (every minute by default) instead of paying a write per
// duplicate; a crash loses at most that minute of the chart's duplicate
// counts, and nothing else.
type DuplicateTally struct {
	mu     sync.Mutex
	byHour map[int64]int // unix seconds of the hour -> count
}

// Add counts n duplicates answered at at.
func (d *DuplicateTally) Add(at time.Time, n int) {
	h := at.UTC().Truncate(time.Hour).Unix()
	d.mu.Lock()
	if d.byHour == nil {
		d.byHour = map[int64]int{}
	}
	d.byHour[h] += n
	d.mu.Unlock()
}

// Take returns the tally and starts a new one. A store that cannot write
// it gives it back with Add.
func (d *DuplicateTally) Take() map[int64]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.byHour
	d.byHour = nil
	return m
}

// AddTo adds the tally not yet written to the hours of out (sorted, from
// since to now), inserting hours it lacks.
func (d *DuplicateTally) AddTo(out []HourActivity, since, now time.Time) []HourActivity {
	d.mu.Lock()
	defer d.mu.Unlock()
	for h := since.UTC().Truncate(time.Hour); !h.After(now); h = h.Add(time.Hour) {
		n := d.byHour[h.Unix()]
		if n == 0 {
			continue
		}
		i := 0
		for i < len(out) && out[i].Hour.Before(h) {
			i++
		}
		if i == len(out) || !out[i].Hour.Equal(h) {
			out = append(out[:i], append([]HourActivity{{Hour: h}}, out[i:]...)...)
		}
		out[i].Duplicate += n
	}
	return out
}
