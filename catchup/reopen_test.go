package catchup_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// The destination fails again during its catch-up: the probe evt_00
// closed the breaker, then evt_01's write finds the CRM down, the breaker
// opens again and evt_01 parks anew; an hour of cooldown later it is the
// probe and closes the breaker once more. The caught-up line's took is
// the last catch-up's, from the second close, as the second outage's
// Slack message counts it; not the hour and more since the first close,
// which spans the whole second outage.
func TestACatchUpThatFailsAgainCountsFromTheLastClose(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 100, CatchUpConcurrency: 2, UnreachableThreshold: 1}}}
	clock := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	down := &stillDown{Store: store, clock: clock, key: "evt_01", id: "1"}
	fake, srv := startFakeN8n(t, down)
	defer srv.Close()
	down.fake, down.base = fake, srv.URL
	parkBehindAnOutage(t, store, fake, srv.URL, clock.Advance, 2)
	logs := &lines{}
	r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep, Logger: slog.New(logs),
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: 20 * time.Millisecond,
		Claim: 2 * time.Minute, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- r.Run(ctx) }()
	defer func() { cancel(); <-stopped; fake.wg.Wait() }()
	clock.Advance(time.Hour) // the first cooldown ends
	// The outage of evt_01 may be a catch-up of its own (the first one
	// ended between its reserve and its fail) or the same one going on:
	// either way the last catch-up's report comes after the second close.
	var closes []time.Time
	var last keystore.Event
	testwait.For(t, "a catch-up reported after the second close", func() bool {
		evs, err := store.Events(ctx, 0, 1000)
		if err != nil {
			return false
		}
		closes = closes[:0]
		for _, ev := range evs {
			switch ev.Kind {
			case keystore.EventBreakerClosed:
				closes = append(closes, ev.At)
			case keystore.EventCaughtUp:
				last = ev
			}
		}
		return len(closes) == 2 && !last.At.Before(closes[1]) && fake.written() == 2
	})
	down.mu.Lock()
	reparks := down.reparks
	down.mu.Unlock()
	if reparks != 1 || fake.written() != 2 {
		t.Fatalf("evt_01 parked again %d times (want 1), %d events written (want 2): the test did not play the outage it means to", reparks, fake.written())
	}
	lines := logs.matching("caught up: ")
	line := lines[len(lines)-1]
	m := tookRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no took in %q", line)
	}
	took, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if took != last.Took.Round(time.Millisecond) {
		t.Fatalf("the log says the catch-up took %s, its caught_up event %s: one figure", took, last.Took)
	}
	if span := keystore.CatchUpTook(closes[1], last.At); took > span+time.Second || took < 0 {
		t.Fatalf("the log says the catch-up took %s; from the last close (%s) to its report is %s: %q",
			took, closes[1].Format(time.TimeOnly), span, line)
	}
}
