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
			ok, wait := keystore.DecideCatchUpStart(t0, c.last, c.inFlight, dp)
			if ok != c.ok || wait != c.wait {
				t.Fatalf("got (%v, %v), want (%v, %v)", ok, wait, c.ok, c.wait)
			}
		})
	}
	if d := (keystore.Policies{}).Destination("x"); d.CatchUpRate != keystore.DefaultCatchUpRate || d.CatchUpConcurrency != keystore.DefaultCatchUpConcurrency {
		t.Fatalf("defaults not filled in: %+v", d)
	}
}
