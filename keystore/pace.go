package keystore

import (
	"sync"
	"time"
)

// The one pace of a destination's resume calls, as every guard sharing
// the store sees it (a bbolt file keeps it in a bucket, PostgreSQL in a
// row every replica locks): each call to n8n takes a turn here, the
// first call of a resume together with one of catch_up_concurrency
// slots, which it holds until its execution finished.
//
// The rate holds for the calls as n8n receives them, in any sliding
// window, not only for the decisions: a call is known to have reached
// n8n at some moment between its turn (At) and the moment its guard
// said it returned (End). A turn is given only when the call that would
// make the window too full ended at least a window ago; so however late
// a goroutine gets to run between its turn and its call, no window of
// RateWindow holds more calls than the rate allows.

// ResumeCallTimeout bounds one resume call to n8n; ResumeCallBound is how
// long a call whose end was never told (its guard died during the call)
// counts as going on.
const (
	ResumeCallTimeout = 15 * time.Second
	ResumeCallBound   = ResumeCallTimeout + 5*time.Second
)

// Pace is a destination's resume pace.
type Pace struct {
	Last time.Time // the latest call's turn (zero: none yet): the gap of 1 / rate
	// Slots: at most catch_up_concurrency, each held until its Until, or
	// until the key it holds for is no longer resumed (a guard that died
	// holding it frees it then: Slot.Live).
	Slots []Slot
	// Calls: the latest calls, oldest first, as many as one window may
	// hold (RateWindow).
	Calls []Call
}

// Slot is one in-flight place of a destination.
type Slot struct {
	Until          time.Time // zero or past: free
	Namespace, Key string    // the key whose resume holds it ("": unknown, held until Until)
}

// Call is one resume call to n8n.
type Call struct {
	At   time.Time // its turn
	End  time.Time // when its guard said it returned, rounded up (zero: not yet)
	Slot int       // the slot of its turn
}

// Turn is one resume call's place in its destination's pace: the slot
// its resume holds until it is released or Until passes, and when this
// call took its turn.
type Turn struct {
	Destination    string
	Namespace, Key string
	At             time.Time // when this call took its turn
	Slot           int
	Until          time.Time
}

// TurnRequest asks for a resume call's turn.
type TurnRequest struct {
	Destination    string
	Namespace, Key string        // the claimed key the call resumes
	Hold           time.Duration // how long a slot taken is held at most
	// Held, set, is the turn of an earlier call of the same resume (a
	// retry): the call goes in its slot and only the rate is decided. A
	// slot that lapsed meanwhile is taken anew, as a first call's.
	Held *Turn
	// Ahead is how far after now a turn may be given (its At), the
	// caller waiting until At before its call: so several turns share one
	// commit of the store. Only for a store whose clock is the caller's
	// (bbolt); 0: at now only.
	Ahead time.Duration
}

// RateWindow is the rate as a window: at most n calls in any window of
// length w (n of a fractional rate rounded down: 2.5 a second allows 2 in
// any second; below 1 a second, one call per 1 / rate).
func RateWindow(rate float64) (n int, w time.Duration) {
	switch {
	case rate <= 0:
		return 0, 0 // no rate: only the slots
	case rate < 1:
		return 1, time.Duration(float64(time.Second) / rate)
	case rate > maxRateWindow:
		return maxRateWindow, time.Second
	}
	return int(rate), time.Second
}

// maxRateWindow caps the calls a pace keeps: a store writes them at
// each turn.
const maxRateWindow = 1000

// DecideResumeTurn decides whether a resume call of req's destination may
// go at now, or within req.Ahead of it (the turn's At). live says whether the key a held slot names is still being
// resumed (its record, read in the same transaction: ResumeInFlight); nil
// trusts the slots' Until alone. ok: the turn and the pace to store. Not
// ok: wait is how long until the rate allows a call; 0 is until a slot is
// released or a call ends, which another guard may do (look again after a
// while, or when this process frees one).
func DecideResumeTurn(p Pace, req TurnRequest, dp DestinationPolicy, now time.Time, live func(Slot) bool) (next Pace, t Turn, ok bool, wait time.Duration) {
	slot := -1
	if h := req.Held; h != nil && h.Slot >= 0 && h.Slot < len(p.Slots) && p.Slots[h.Slot].Until.Equal(h.Until) && h.Until.After(now) {
		slot = h.Slot // a retry in the slot its resume holds
	}
	if slot < 0 {
		if slot = freeSlot(p, dp.CatchUpConcurrency, now, live); slot < 0 {
			return p, Turn{}, false, 0
		}
	}
	at, ok := rateAllows(p, dp.CatchUpRate, now)
	switch {
	case !ok:
		return p, Turn{}, false, 0 // until a call's end is told
	case at.Sub(now) > max(req.Ahead, 0):
		return p, Turn{}, false, at.Sub(now) - max(req.Ahead, 0)
	}
	next = Pace{Last: at, Slots: make([]Slot, max(dp.CatchUpConcurrency, len(p.Slots)))}
	copy(next.Slots, p.Slots)
	t = Turn{Destination: req.Destination, Namespace: req.Namespace, Key: req.Key, At: at, Slot: slot}
	if req.Held != nil && slot == req.Held.Slot {
		t.Namespace, t.Key, t.Until = req.Held.Namespace, req.Held.Key, req.Held.Until
	} else {
		t.Until = at.Add(req.Hold)
		next.Slots[slot] = Slot{Until: t.Until, Namespace: req.Namespace, Key: req.Key}
	}
	n, _ := RateWindow(dp.CatchUpRate)
	next.Calls = append(append([]Call(nil), p.Calls...), Call{At: at, Slot: slot})
	if extra := len(next.Calls) - max(n, 1); extra > 0 {
		next.Calls = next.Calls[extra:]
	}
	return next, t, true, 0
}

// freeSlot is the first free slot of p among the first conc (-1: none).
func freeSlot(p Pace, conc int, now time.Time, live func(Slot) bool) int {
	for i := 0; i < conc; i++ {
		if i >= len(p.Slots) || !p.Slots[i].held(now, live) {
			return i
		}
	}
	return -1
}

func (s Slot) held(now time.Time, live func(Slot) bool) bool {
	return s.Until.After(now) && (live == nil || s.Key == "" || live(s))
}

// rateAllows is the earliest time from now on the rate lets the next
// call go: the gap (1 / rate after the latest turn) and the window
// (RateWindow: the call that would be the window's n+1-th ended a window
// before). ok is false while that call's end is not told (until
// ResumeCallBound after its turn).
func rateAllows(p Pace, rate float64, now time.Time) (at time.Time, ok bool) {
	at = now
	n, w := RateWindow(rate)
	if n == 0 {
		return at, true
	}
	if !p.Last.IsZero() {
		if next := p.Last.Add(time.Duration(float64(time.Second) / rate)); at.Before(next) {
			at = next
		}
	}
	if len(p.Calls) >= n {
		c := p.Calls[len(p.Calls)-n]
		end := c.End
		if end.IsZero() {
			if bound := c.At.Add(ResumeCallBound); now.Before(bound) {
				return time.Time{}, false
			}
			end = c.At.Add(ResumeCallBound)
		}
		if next := end.Add(w); at.Before(next) {
			at = next
		}
	}
	return at, true
}

// EndCall records that t's call returned at now (ok false, p unchanged:
// it is not among the calls kept, or its end is known). now is rounded up
// to the next millisecond: the stores read their clocks truncated to the
// millisecond, and the call may have returned within it.
func EndCall(p Pace, t Turn, now time.Time) (next Pace, ok bool) {
	for i := len(p.Calls) - 1; i >= 0; i-- {
		if c := p.Calls[i]; c.At.Equal(t.At) && c.Slot == t.Slot {
			if !c.End.IsZero() {
				return p, false
			}
			next = Pace{Last: p.Last, Slots: p.Slots, Calls: append([]Call(nil), p.Calls...)}
			next.Calls[i].End = now.Add(time.Millisecond)
			return next, true
		}
	}
	return p, false
}

// ReleaseTurn frees t's slot in p and ends its call if that was not told;
// ok is false (p unchanged) when the slot lapsed and was taken by
// another turn meanwhile, or is free, and its call's end is known.
func ReleaseTurn(p Pace, t Turn, now time.Time) (next Pace, ok bool) {
	next, ok = EndCall(p, t, now)
	if t.Slot < 0 || t.Slot >= len(next.Slots) || !next.Slots[t.Slot].Until.Equal(t.Until) || next.Slots[t.Slot].Key != t.Key {
		return next, ok
	}
	slots := append([]Slot(nil), next.Slots...)
	slots[t.Slot] = Slot{}
	return Pace{Last: next.Last, Slots: slots, Calls: next.Calls}, true
}

// ResumeInFlight reports whether r is a key whose resume a slot may be
// held for: claimed, woken and not reserved yet, or its woken execution's
// attempt while its lease runs. Finished, parked anew, lost or gone, its
// slot is free whatever the slot's Until says: so what is in flight is
// read from the keys, after a restart too.
func ResumeInFlight(r *Record, now time.Time) bool {
	switch {
	case r == nil:
		return false
	case r.State == StateReserved:
		return r.LeaseExpiresAt == nil || now.Before(*r.LeaseExpiresAt)
	case r.State == StateParked:
		return r.Reason != ReasonResumeLost &&
			(r.ResumeSentAt != nil || r.ResumeClaimUntil != nil && now.Before(*r.ResumeClaimUntil))
	}
	return false
}

// Wake is a broadcast a store keeps for PaceFreed: Notify closes the
// channel C returned and starts a new one. The zero value is ready.
type Wake struct {
	mu sync.Mutex
	ch chan struct{}
}

// C is closed at the next Notify.
func (w *Wake) C() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// Notify wakes every holder of C.
func (w *Wake) Notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}
