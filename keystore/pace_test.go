package keystore

import (
	"fmt"
	"math/rand"
	"sort"
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
	req := TurnRequest{Destination: "crm", Hold: hold}
	p, a, ok, _ := DecideResumeTurn(Pace{}, req, dp, t0, nil)
	if !ok || a.Slot != 0 || !a.Until.Equal(t0.Add(hold)) {
		t.Fatalf("first turn: %v %+v", ok, a)
	}
	if _, _, ok, wait := DecideResumeTurn(p, req, dp, t0.Add(50*time.Millisecond), nil); ok || wait != 50*time.Millisecond {
		t.Fatalf("within the gap: %v, wait %s (want 50ms)", ok, wait)
	}
	p, b, ok, _ := DecideResumeTurn(p, req, dp, t0.Add(100*time.Millisecond), nil)
	if !ok || b.Slot != 1 {
		t.Fatalf("second turn: %v %+v", ok, b)
	}
	if _, _, ok, wait := DecideResumeTurn(p, req, dp, t0.Add(time.Second), nil); ok || wait != 0 {
		t.Fatalf("both slots held: %v, wait %s (want 0: until one is released)", ok, wait)
	}
	// A retry of b goes in b's slot: only the rate is decided.
	p, b2, ok, _ := DecideResumeTurn(p, TurnRequest{Destination: "crm", Hold: hold, Held: &b}, dp, t0.Add(time.Second), nil)
	if !ok || b2.Slot != b.Slot || !b2.Until.Equal(b.Until) || !b2.At.Equal(t0.Add(time.Second)) {
		t.Fatalf("a retry in its slot: %v %+v", ok, b2)
	}
	p, released := ReleaseTurn(p, a, t0.Add(time.Second))
	if !released {
		t.Fatal("the first turn was not released")
	}
	p, c, ok, _ := DecideResumeTurn(p, req, dp, t0.Add(2*time.Second), nil)
	if !ok || c.Slot != 0 {
		t.Fatalf("after a release: %v %+v", ok, c)
	}
	// b's slot lapses and is taken by d; b's late release frees nothing.
	p, d, ok, _ := DecideResumeTurn(p, req, dp, b.Until.Add(time.Millisecond), nil)
	if !ok || d.Slot != 1 {
		t.Fatalf("a lapsed slot: %v %+v", ok, d)
	}
	if next, _ := ReleaseTurn(p, b2, b.Until.Add(time.Second)); !next.Slots[1].Until.Equal(d.Until) {
		t.Fatal("a lapsed turn's release freed the slot another turn holds")
	}
	if _, ok := ReleaseTurn(p, d, b.Until.Add(time.Second)); !ok {
		t.Fatal("the holder's release did not free its slot")
	}
}

// A slot whose key is no longer resumed is free whatever its Until says
// (a guard that died, or a store reopened, left it held): what is in
// flight is read off the keys.
func TestASlotIsHeldWhileItsKeyIsResumed(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	dp := DestinationPolicy{CatchUpRate: 10, CatchUpConcurrency: 1}
	p, _, ok, _ := DecideResumeTurn(Pace{}, TurnRequest{Destination: "crm", Namespace: "n", Key: "a", Hold: time.Hour}, dp, t0, nil)
	if !ok {
		t.Fatal("first turn refused")
	}
	later := t0.Add(time.Second)
	claim := later.Add(time.Minute)
	lease := later.Add(-time.Second)
	for _, c := range []struct {
		name string
		rec  *Record
		held bool
	}{
		{"claimed", &Record{State: StateParked, ResumeClaimUntil: &claim}, true},
		{"woken", &Record{State: StateParked, ResumeSentAt: &t0}, true},
		{"its execution's attempt", &Record{State: StateReserved, LeaseExpiresAt: &claim}, true},
		{"its execution died (lease over)", &Record{State: StateReserved, LeaseExpiresAt: &lease}, false},
		{"finished", &Record{State: StateCompleted}, false},
		{"parked anew", &Record{State: StateParked}, false},
		{"lost", &Record{State: StateParked, Reason: ReasonResumeLost, ResumeSentAt: &t0}, false},
		{"gone", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, ok, _ := DecideResumeTurn(p, TurnRequest{Destination: "crm", Namespace: "n", Key: "b", Hold: time.Hour}, dp, later,
				func(s Slot) bool { return ResumeInFlight(c.rec, later) })
			if ok == c.held {
				t.Fatalf("a second turn given %v with the first key %s", ok, c.name)
			}
		})
	}
}

// The property of the pace: whatever the rate, the slots, and however
// late each call goes after its turn and returns after it went (a loaded
// machine, a slow n8n), no sliding window of RateWindow holds more calls
// than the rate allows (no second more than catch_up_rate), and never
// more than catch_up_concurrency turns are held at once. Calls, retries,
// ends and releases come at random times.
func TestResumeCallsKeepTheRateInEverySlidingWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	full := 0 // runs in which some window held all the rate allows
	for seed := int64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewSource(seed))
		rates := []float64{0.5, 1, 2.5, 4, 10, 37}
		dp := DestinationPolicy{CatchUpRate: rates[rng.Intn(len(rates))], CatchUpConcurrency: 1 + rng.Intn(6)}
		calls, maxHeld := simulatePace(rng, dp, t0)
		n, w := RateWindow(dp.CatchUpRate)
		if len(calls) <= n {
			t.Fatalf("seed %d: only %d calls at %+v: nothing was tested", seed, len(calls), dp)
		}
		if maxHeld > dp.CatchUpConcurrency {
			t.Fatalf("seed %d (%+v): %d turns held at once", seed, dp, maxHeld)
		}
		sort.Slice(calls, func(i, j int) bool { return calls[i].Before(calls[j]) })
		most := 0
		for i, j := 0, 0; i < len(calls); i++ {
			for !calls[i].Before(calls[j].Add(w)) {
				j++
			}
			if i-j+1 > n {
				t.Fatalf("seed %d (%+v): %d calls within %s from %s (%s): the rate allows %d",
					seed, dp, i-j+1, w, calls[j].Format("15:04:05.000000"), gaps(calls[j:i+1]), n)
			}
			most = max(most, i-j+1)
		}
		if most == n {
			full++
		}
	}
	if full < 100 {
		t.Fatalf("only %d of 300 runs filled a window: the rate was hardly tested", full)
	}
}

// simulatePace runs random resumes against one pace for a while and
// returns when n8n received each call and the most turns held at once.
func simulatePace(rng *rand.Rand, dp DestinationPolicy, t0 time.Time) (calls []time.Time, maxHeld int) {
	type resume struct {
		turn                   Turn
		callAt, endAt, release time.Time
		called, ended          bool
	}
	var (
		p      Pace
		active []*resume
		now    = t0
	)
	jitter := func(most time.Duration) time.Duration { return time.Duration(rng.Int63n(int64(most))) }
	ahead := []time.Duration{0, 0, 5 * time.Millisecond, 30 * time.Millisecond}[rng.Intn(4)] // a call waits until its turn's At
	for step := 0; step < 4000; step++ {
		now = now.Add(jitter(4 * time.Millisecond))
		kept := active[:0]
		for _, r := range active {
			if !r.called && !now.Before(r.callAt) {
				r.called = true
				calls = append(calls, r.callAt)
			}
			if r.called && !r.ended && !now.Before(r.endAt) {
				r.ended = true
				p, _ = EndCall(p, r.turn, now)
			}
			switch {
			case !r.ended:
			case !now.Before(r.release):
				p, _ = ReleaseTurn(p, r.turn, now)
				continue
			case rng.Intn(40) == 0: // a retry in its slot
				if next, tu, ok, _ := DecideResumeTurn(p, TurnRequest{Destination: "crm", Hold: time.Hour, Held: &r.turn, Ahead: ahead}, dp, now, nil); ok {
					p, r.turn, r.called, r.ended = next, tu, false, false
					r.callAt = tu.At.Add(jitter(60 * time.Millisecond))
					r.endAt = r.callAt.Add(jitter(120 * time.Millisecond))
				}
			}
			kept = append(kept, r)
		}
		active = kept
		if rng.Intn(2) == 0 {
			req := TurnRequest{Destination: "crm", Namespace: "n", Key: fmt.Sprint(step), Hold: time.Hour, Ahead: ahead}
			if next, tu, ok, _ := DecideResumeTurn(p, req, dp, now, nil); ok {
				if tu.At.Before(now) || tu.At.After(now.Add(ahead)) {
					panic(fmt.Sprintf("a turn at %s, now %s, ahead %s", tu.At, now, ahead))
				}
				p = next
				r := &resume{turn: tu, callAt: tu.At.Add(jitter(60 * time.Millisecond))}
				r.endAt = r.callAt.Add(jitter(120 * time.Millisecond))
				r.release = r.endAt.Add(jitter(400 * time.Millisecond))
				active = append(active, r)
			}
		}
		maxHeld = max(maxHeld, len(active))
	}
	return calls, maxHeld
}

func gaps(calls []time.Time) string {
	s := ""
	for i := 1; i < len(calls); i++ {
		s += " +" + calls[i].Sub(calls[i-1]).String()
	}
	return s
}
