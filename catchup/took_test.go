package catchup_test

import (
	"context"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

var tookRE = regexp.MustCompile(` took=(\S+)`)

// The caught-up line's "took" is the catch-up's, from the breaker's
// close, the span the outage's Slack message gives (keystore.
// CatchUpTook from the breaker_closed event): not from when the worker
// first saw parked events, an hour of cooldown earlier. Before, Slack
// said "took 5 s" and the log "2 min 16 s" of one catch-up.
func TestTheCatchUpTookCountsFromTheBreakersClose(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 100, CatchUpConcurrency: 2, UnreachableThreshold: 1}}}
	store, clock, fake, srv := outage(t, pol, 3)
	logs := &lines{}
	r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep, Logger: slog.New(logs),
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)}, Interval: 10 * time.Millisecond, Claim: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- r.Run(ctx) }()
	defer func() { cancel(); <-stopped; fake.wg.Wait() }()
	testwait.For(t, "the worker started during the cooldown", func() bool { return len(logs.matching("destination paused")) == 1 })
	clock.Advance(time.Hour) // the cooldown ends: the probe goes, its complete closes the breaker
	testwait.For(t, "caught up", func() bool { return len(logs.matching("caught up: ")) == 1 })
	end := clock.Now()

	line := logs.matching("caught up: ")[0]
	m := tookRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no took in %q", line)
	}
	took, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	evs, err := store.Events(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var closedAt time.Time
	for _, ev := range evs {
		if ev.Kind == keystore.EventBreakerClosed {
			closedAt = ev.At
		}
	}
	if closedAt.IsZero() {
		t.Fatal("no breaker_closed event")
	}
	// The Slack message's span starts at closedAt and ends when nothing is
	// left, at or before the line (end): the line's took is within it.
	if slack := keystore.CatchUpTook(closedAt, end); took > slack+time.Second || took <= 0 {
		t.Fatalf("the log says the catch-up took %s; from the breaker's close (%s) to the line is %s: %q", took, closedAt.Format(time.TimeOnly), slack, line)
	}
}
