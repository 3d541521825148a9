package keystore

import "time"

// Pause is how a destination's breaker holds one namespace's writes at a
// moment, for a worker that starts them elsewhere (a re-run, whose gate
// would meet destination_paused and end without a write).
type Pause struct {
	// Namespace is "" when the destination is paused for every
	// namespace, else the namespace it is paused for alone (its view).
	Namespace string
	// State: closed, the write goes; open, it waits until Until (the
	// cooldown's or the window's end); half_open, it waits until Until for
	// the probe in flight, or with Until zero it may be the probe.
	State BreakerState
	Until time.Time
}

// PauseOf is how b (nil: the destination has no breaker) holds ns's
// writes at now: the destination's breaker while it is not closed, else
// ns's view of it.
func PauseOf(b *Breaker, ns string, now time.Time) Pause {
	if b == nil {
		return Pause{State: BreakerClosed}
	}
	v := b.View(now)
	if v.State != BreakerClosed {
		return pauseOf("", v.State, v.ReopensAt, v.ProbeUntil, now)
	}
	for _, nv := range v.Views {
		if nv.Namespace == ns {
			return pauseOf(ns, nv.State, nv.ReopensAt, nv.ProbeUntil, now)
		}
	}
	return Pause{State: BreakerClosed}
}

func pauseOf(ns string, state BreakerState, reopensAt, probeUntil *time.Time, now time.Time) Pause {
	switch {
	case state == BreakerOpen && reopensAt != nil:
		return Pause{Namespace: ns, State: state, Until: *reopensAt}
	case state == BreakerHalfOpen && probeUntil != nil && now.Before(*probeUntil):
		return Pause{Namespace: ns, State: state, Until: *probeUntil}
	case state == BreakerHalfOpen:
		return Pause{Namespace: ns, State: state}
	}
	return Pause{State: BreakerClosed} // open without a reopening time holds nothing
}
