package notify_test

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// wokenN8n stands in for n8n: each resume is accepted and its woken
// execution reserves the key again and completes it, after reaching its
// reserve took a while of the test's clock.
type wokenN8n struct {
	w  *parkWorld
	wg sync.WaitGroup
}

func (n *wokenN8n) Resume(_ context.Context, rec *keystore.Record) n8n.ResumeOutcome {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx := context.Background()
		n.w.clock.Advance(20 * time.Second)
		res, err := n.w.store.Reserve(ctx, keystore.ReserveRequest{Namespace: rec.Namespace, Key: rec.Key, Destination: rec.Destination})
		if err != nil || res.Outcome != keystore.OutcomeAccepted {
			return
		}
		n.w.store.Complete(ctx, keystore.CompleteRequest{Namespace: rec.Namespace, Key: rec.Key, Token: res.Token})
	}()
	return n8n.ResumeOutcome{Answer: keystore.ResumeAccepted, Status: 200, Detail: "Workflow was started"}
}

var tookText = regexp.MustCompile(`took (\d+ min \d+ s|\d+ s)`)

// The outage's Slack message and the catch-up's log line say one figure
// for how long the catch-up took, also when notify looks at the parked
// counts a minute after the catch-up ended; a second guard's report of
// the same catch-up changes nothing. Before, notify measured its own
// span up to its look at the counts: Slack said one figure, the log
// another.
func TestTheOutageMessageSaysTheCatchUpsOwnTook(t *testing.T) {
	w := newParkWorld(t)
	w.openBreaker()
	w.park(1, 6)
	w.step()
	w.clock.Advance(5 * time.Minute) // the cooldown is over

	logs := &logSink{}
	fake := &wokenN8n{w: w}
	r, err := catchup.New(catchup.Options{Store: w.store, Policies: keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"hubspot": {Cooldown: 5 * time.Minute, UnreachableThreshold: 1, CatchUpConcurrency: 2, CatchUpRate: 100}}},
		Clock: w.clock.Now, Logger: slog.New(logs), Resumer: fake, Interval: 10 * time.Millisecond, Claim: 2 * time.Minute,
		Sleep: func(ctx context.Context, d time.Duration) {
			w.clock.Advance(d)
			select {
			case <-ctx.Done():
			case <-time.After(time.Millisecond): // lets the woken executions run
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- r.Run(ctx) }()
	defer func() { cancel(); <-stopped; fake.wg.Wait() }()
	testwait.For(t, "the catch-up's caught-up line", func() bool { return logs.Matching("caught up: ") == 1 })
	var line string
	for _, l := range logs.Lines() {
		if strings.Contains(l, "caught up: ") {
			line = l
		}
	}
	logTook := tookText.FindString(line)
	if logTook == "" {
		t.Fatalf("no took in the line %q", line)
	}

	w.clock.Advance(time.Minute) // notify looks at the counts later
	w.step()
	w.step()
	slackTook := func() string {
		t.Helper()
		_, ups := w.outage()
		if len(ups) == 0 {
			t.Fatal("the outage message was never updated")
		}
		last := ups[len(ups)-1].Shown()
		if !strings.Contains(last, "hubspot back — caught up: ") {
			t.Fatalf("not caught up: %s", last)
		}
		return tookText.FindString(last)
	}
	if got := slackTook(); got != logTook {
		t.Fatalf("Slack says %q, the log %q (%s)", got, logTook, line)
	}

	// A second guard on the same database reports the same catch-up.
	if err := w.store.RecordCaughtUp(w.ctx, "hubspot", 0, 0, 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	w.step()
	w.step()
	if got := slackTook(); got != logTook {
		t.Fatalf("after a second report Slack says %q, the log %q", got, logTook)
	}
}
