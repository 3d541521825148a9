package keystore

import (
	"testing"
	"time"
)

// A destination's turns: at most catch_up_concurrency slots held, at
// most catch_up_rate turns a second, a released or lapsed slot free
// again, and a lapsed slot taken by another turn not freed by the late
// release of the turn that lost it.
func TestDecideResumeTurn(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	dp := DestinationPolicy{CatchUpRate: 10, CatchUpConcurrency: 2}
	hold := time.Minute
	p, a, ok, _ := DecideResumeTurn(Pace{}, "crm", dp, hold, t0)
	if !ok || a.Slot != 0 || !a.Until.Equal(t0.Add(hold)) {
		t.Fatalf("first turn: %v %+v", ok, a)
	}
	if _, _, ok, wait := DecideResumeTurn(p, "crm", dp, hold, t0.Add(50*time.Millisecond)); ok || wait != 50*time.Millisecond {
		t.Fatalf("within the gap: %v, wait %s (want 50ms)", ok, wait)
	}
	p, b, ok, _ := DecideResumeTurn(p, "crm", dp, hold, t0.Add(100*time.Millisecond))
	if !ok || b.Slot != 1 {
		t.Fatalf("second turn: %v %+v", ok, b)
	}
	if _, _, ok, wait := DecideResumeTurn(p, "crm", dp, hold, t0.Add(time.Second)); ok || wait != 0 {
		t.Fatalf("both slots held: %v, wait %s (want 0: until one is released)", ok, wait)
	}
	p, released := ReleaseTurn(p, a)
	if !released {
		t.Fatal("the first turn was not released")
	}
	p, c, ok, _ := DecideResumeTurn(p, "crm", dp, hold, t0.Add(time.Second))
	if !ok || c.Slot != 0 {
		t.Fatalf("after a release: %v %+v", ok, c)
	}
	// b's slot lapses and is taken by d; b's late release frees nothing.
	p, d, ok, _ := DecideResumeTurn(p, "crm", dp, hold, b.Until.Add(time.Millisecond))
	if !ok || d.Slot != 1 {
		t.Fatalf("a lapsed slot: %v %+v", ok, d)
	}
	if _, ok := ReleaseTurn(p, b); ok {
		t.Fatal("a lapsed turn's release freed the slot another turn holds")
	}
	if _, ok := ReleaseTurn(p, d); !ok {
		t.Fatal("the holder's release did not free its slot")
	}
}
