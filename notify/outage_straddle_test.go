package notify_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

var straddleTook = regexp.MustCompile(`took (\d+ min \d+ s|\d+ s)`)

// A catch-up that began after an outage's close and ended after the next
// outage's close (the destination flapped: the worker kept its first
// close) reports a took spanning both outages. The newer outage's message
// must not say it: its catch-up began at its own close, and the report
// would date its end minutes past the report itself.
func TestACatchUpReportOfAnEarlierOutageIsNotTheNewerOnesTook(t *testing.T) {
	w := newParkWorld(t)
	w.openBreaker()
	w.park(1, 2)
	w.step()
	w.clock.Advance(5 * time.Minute)
	firstClose := w.clock.Now()
	w.resume("evt_001", keystore.ResumeAccepted) // the probe closes the breaker
	w.step()

	// The destination fails again before evt_002 is resumed: outage 2.
	r, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_again", Destination: "hubspot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Fail(w.ctx, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_again", Token: r.Token,
		Reason: keystore.ReasonDestinationUnreachable, Message: "dial tcp: connection refused"}); err != nil {
		t.Fatal(err)
	}
	w.step()
	w.clock.Advance(5 * time.Minute)
	w.resume("evt_002", keystore.ResumeAccepted) // closes outage 2, and nothing is left
	w.step()

	took := w.clock.Now().Sub(firstClose) // the worker counts from outage 1's close
	if err := w.store.RecordCaughtUp(w.ctx, "hubspot", 2, 0, took); err != nil {
		t.Fatal(err)
	}
	w.step()
	w.step()
	posts, ups := w.outage()
	if len(posts) != 2 || len(ups) == 0 {
		t.Fatalf("want two outage messages and updates: %d posts, %d updates", len(posts), len(ups))
	}
	last := ups[len(ups)-1].Shown()
	if !strings.Contains(last, "caught up: ") {
		t.Fatalf("outage 2 not caught up: %s", last)
	}
	if got := straddleTook.FindStringSubmatch(last); got == nil || strings.Contains(got[1], "min") {
		t.Fatalf("outage 2's message says a took of minutes, the span since outage 1's close (%s): %s", took, last)
	}
}
