package keystore

import (
	"testing"
	"time"
)

// How a destination's breaker holds one namespace's writes: the
// destination's state while it is not closed (for every namespace), else
// the namespace's own view; half open, a probe in flight holds them until
// its end, and without one the next write is the probe.
func TestPauseOf(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	view := func(ns string, reopens time.Time, probeUntil *time.Time) BreakerView {
		return BreakerView{Namespace: ns, State: BreakerOpen, ReopensAt: &reopens, ProbeKey: "p", ProbeUntil: probeUntil}
	}
	for _, tc := range []struct {
		name string
		b    *Breaker
		want Pause
	}{
		{"no breaker", nil, Pause{State: BreakerClosed}},
		{"closed", NewBreaker("crm"), Pause{State: BreakerClosed}},
		{"open in its cooldown (or a window)", &Breaker{State: BreakerOpen, ReopensAt: &later}, Pause{State: BreakerOpen, Until: later}},
		{"open past its cooldown, no probe", &Breaker{State: BreakerOpen, ReopensAt: &earlier}, Pause{State: BreakerHalfOpen}},
		{"half open, its probe in flight", &Breaker{State: BreakerHalfOpen, ReopensAt: &earlier, ProbeKey: "p", ProbeUntil: &later},
			Pause{State: BreakerHalfOpen, Until: later}},
		{"half open, its probe's hold passed", &Breaker{State: BreakerHalfOpen, ReopensAt: &earlier, ProbeKey: "p", ProbeUntil: &earlier},
			Pause{State: BreakerHalfOpen}},
		{"open without a reopening time", &Breaker{State: BreakerOpen}, Pause{State: BreakerClosed}},
		{"open for all and for the namespace: the destination's", &Breaker{State: BreakerOpen, ReopensAt: &later,
			Views: []BreakerView{view("billing", later.Add(time.Hour), nil)}}, Pause{State: BreakerOpen, Until: later}},
		{"closed, open for the namespace alone", &Breaker{State: BreakerClosed, Views: []BreakerView{view("billing", later, nil)}},
			Pause{Namespace: "billing", State: BreakerOpen, Until: later}},
		{"closed, the namespace's view past its cooldown, its probe in flight", &Breaker{State: BreakerClosed,
			Views: []BreakerView{view("billing", earlier, &later)}}, Pause{Namespace: "billing", State: BreakerHalfOpen, Until: later}},
		{"closed, the namespace's view past its cooldown, no probe", &Breaker{State: BreakerClosed,
			Views: []BreakerView{view("billing", earlier, nil)}}, Pause{Namespace: "billing", State: BreakerHalfOpen}},
		{"closed, open for another namespace alone", &Breaker{State: BreakerClosed, Views: []BreakerView{view("crm", later, nil)}},
			Pause{State: BreakerClosed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PauseOf(tc.b, "billing", now); got != tc.want {
				t.Fatalf("PauseOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}
