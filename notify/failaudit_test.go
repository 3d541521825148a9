package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// A decision on a failed execution, in Slack or the console, is written
// to the store's event log for the audit: who, what, and which execution.
func TestDecisionsOnFailuresAreAudited(t *testing.T) {
	k := newKeysHarness(t)
	ctx := context.Background()
	decided := func() []keystore.Event {
		t.Helper()
		evs, err := k.ks.RecentEvents(ctx, keystore.EventQuery{Kinds: []keystore.EventKind{keystore.EventFailureDecided}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	a := k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "4711"))
	hdr, body := signed(signingSecret, time.Now(), blockAction("U0ORDERS", ActionAck, a.NotificationID))
	if err := k.in.Interaction(ctx, hdr, body); err != nil {
		t.Fatal(err)
	}
	k.waitClicks()
	evs := decided()
	if len(evs) != 1 || evs[0].Message != DecisionAcknowledged || !strings.Contains(evs[0].Owner, "U0ORDERS") ||
		!strings.Contains(evs[0].Summary, "execution 4711 of workflow orders-sync") || !strings.Contains(evs[0].Summary, a.NotificationID) {
		t.Fatalf("after a Slack acknowledgement the audit holds %+v", evs)
	}

	b := k.intake(failureBody("orders-billing", "POST invoice", "HTTP 502", "4712"))
	if _, err := k.decider().DecideFailure(ctx, b.NotificationID, ActionSnooze, "console: on-call"); err != nil {
		t.Fatal(err)
	}
	if evs = decided(); len(evs) != 2 || evs[0].Message != DecisionSnoozed || evs[0].Owner != "console: on-call" || !strings.Contains(evs[0].Summary, "4712") {
		t.Fatalf("after a snooze in the console the audit holds %+v", evs)
	}
	// The snoozed one acknowledged; then a refused decision (taken
	// already) writes nothing.
	if _, err := k.decider().DecideFailure(ctx, b.NotificationID, ActionAck, "console: ana"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.decider().DecideFailure(ctx, b.NotificationID, ActionAck, "console: on-call"); err == nil {
		t.Fatal("a second acknowledgement was taken")
	}
	if evs = decided(); len(evs) != 3 || evs[0].Owner != "console: ana" || evs[0].Message != DecisionAcknowledged {
		t.Fatalf("the audit after an acknowledgement and a refused one: %+v", evs)
	}
}
