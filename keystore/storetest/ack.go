package storetest

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Acknowledgements (keystore/ack.go): "Leave it to me" and a snooze are in
// the key's history, by the person, and change nothing else.
func runAcks(t *testing.T, newStore New) {
	t.Run("an acknowledgement and a snooze are in the history, by the person; nothing else changes", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		as := e.s
		r := e.reserve(ns, "evt_ack")
		e.fail(ns, "evt_ack", r.Token, keystore.ReasonOutcomeUnknown)
		before := e.lookup(ns, "evt_ack").Record
		e.clock.Advance(90 * time.Second)
		for _, ev := range []keystore.HistoryEvent{keystore.HistoryAcknowledged, keystore.HistorySnoozed} {
			if _, err := as.Acknowledge(e.ctx, keystore.AckRequest{Namespace: ns, Key: "evt_ack", Attempt: 1, Event: ev,
				By: " Ana (Slack U0OFFICE) ", Detail: "Leave it to me, in Slack"}); err != nil {
				t.Fatal(err)
			}
		}
		e.restart()
		as = e.s
		after := e.lookup(ns, "evt_ack").Record
		if after.State != keystore.StateUnknown || !after.UpdatedAt.Equal(before.UpdatedAt) || after.Attempt != before.Attempt ||
			len(after.History) != len(before.History)+2 {
			t.Fatalf("an acknowledgement changed the key: %+v → %+v", before, after)
		}
		for i, ev := range []keystore.HistoryEvent{keystore.HistoryAcknowledged, keystore.HistorySnoozed} {
			h := after.History[len(before.History)+i]
			if h.Event != ev || h.By != "Ana (Slack U0OFFICE)" || h.Attempt != 1 || h.Detail != "Leave it to me, in Slack" || !h.At.Equal(e.clock.Now()) {
				t.Fatalf("history entry %d: %+v", i, h)
			}
		}
		// A later attempt, an absent key, a bad request: refused, nothing written.
		_, err := as.Acknowledge(e.ctx, keystore.AckRequest{Namespace: ns, Key: "evt_ack", Attempt: 2, Event: keystore.HistoryAcknowledged, By: "Ana"})
		wantCode(t, err, errs.Conflict)
		_, err = as.Acknowledge(e.ctx, keystore.AckRequest{Namespace: ns, Key: "evt_none", Event: keystore.HistoryAcknowledged, By: "Ana"})
		wantCode(t, err, errs.NotFound)
		_, err = as.Acknowledge(e.ctx, keystore.AckRequest{Namespace: ns, Key: "evt_ack", Event: keystore.HistoryResolved, By: "Ana"})
		wantCode(t, err, errs.InvalidRequest)
		_, err = as.Acknowledge(e.ctx, keystore.AckRequest{Namespace: ns, Key: "evt_ack", Event: keystore.HistoryAcknowledged, By: " "})
		wantCode(t, err, errs.InvalidRequest)
		sameRecord(t, after, e.lookup(ns, "evt_ack").Record)
		if r := e.lookup(ns, "evt_none"); r.Record != nil {
			t.Fatalf("an acknowledgement of an absent key wrote %+v", r.Record)
		}
	})
}
