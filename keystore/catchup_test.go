package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

func TestCatchUpPace(t *testing.T) {
	dp := keystore.DestinationPolicy{CatchUpRate: 4, CatchUpConcurrency: 2}
	cases := []struct {
		name     string
		last     time.Time
		inFlight int
		ok       bool
		wait     time.Duration
	}{
		{"the first resume starts at once", time.Time{}, 0, true, 0},
		{"a full destination waits for one to finish", time.Time{}, 2, false, 0},
		{"too soon after the last one waits the rest of the gap", t0.Add(-100 * time.Millisecond), 1, false, 150 * time.Millisecond},
		{"a gap later it starts", t0.Add(-250 * time.Millisecond), 1, true, 0},
		{"full and too soon: waits for a slot", t0.Add(-10 * time.Millisecond), 2, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := keystore.Pace{Last: c.last}
			for range c.inFlight {
				p.Slots = append(p.Slots, keystore.Slot{Until: t0.Add(time.Minute)})
			}
			_, _, ok, wait := keystore.DecideResumeTurn(p, keystore.TurnRequest{Destination: "crm", Hold: time.Minute}, dp, t0, nil)
			if ok != c.ok || wait != c.wait {
				t.Fatalf("got (%v, %v), want (%v, %v)", ok, wait, c.ok, c.wait)
			}
		})
	}
	if d := (keystore.Policies{}).Destination("x"); d.CatchUpRate != keystore.DefaultCatchUpRate || d.CatchUpConcurrency != keystore.DefaultCatchUpConcurrency {
		t.Fatalf("defaults not filled in: %+v", d)
	}
}

// The closing line of a catch-up counts what happened; it never says
// every event was resumed when some were lost.
func TestCaughtUpLineSaysWhatHappened(t *testing.T) {
	for _, c := range []struct {
		resumed, lost int
		took          time.Duration
		want          string
	}{
		{37, 2, 40*time.Second + 200*time.Millisecond, "caught up: 37 resumed, 2 lost (owner told), took 41 s"},
		{20, 0, 900 * time.Millisecond, "caught up: 20 resumed, 0 lost, took 1 s"},
		{0, 3, 10 * time.Second, "caught up: 0 resumed, 3 lost (owner told), took 10 s"},
		{10000, 0, 261 * time.Second, "caught up: 10000 resumed, 0 lost, took 4 min 21 s"},
	} {
		if got := keystore.CaughtUp(c.resumed, c.lost, c.took); got != c.want {
			t.Errorf("CaughtUp(%d, %d, %s) = %q, want %q", c.resumed, c.lost, c.took, got, c.want)
		}
	}
}
