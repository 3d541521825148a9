package bolt

import (
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// A summary is appended to the record's and the event's array only when
// there is one: a record or event without it is written in the layout
// older versions read, and both layouts read back.
func TestCodecAppendsTheSummaryOnlyWhenThereIsOne(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for name, summary := range map[string]string{"without": "", "with": "Invoice 4711 · 12,000 EUR · ACME"} {
		t.Run(name, func(t *testing.T) {
			r := &keystore.Record{Namespace: "invoices", Key: "inv_4711", State: keystore.StateCompleted, Attempt: 1,
				CreatedAt: now, UpdatedAt: now, Summary: summary,
				History: []keystore.Transition{{At: now, Event: keystore.HistoryReserved, Attempt: 1}}}
			body, err := encodeRecordBody(r)
			if err != nil {
				t.Fatal(err)
			}
			var old diskRecord
			if err := decMode.Unmarshal(body, &old); (err == nil) != (summary == "") {
				t.Fatalf("the layout of older versions read %v (summary %q): %v", err == nil, summary, err)
			}
			got, err := decodeRecordBody("invoices", "inv_4711", body)
			if err != nil || got.Summary != summary {
				t.Fatalf("record read back with summary %q, %v; want %q", got.Summary, err, summary)
			}
			b, err := encodeEvent(keystore.Event{At: now, Kind: keystore.EventApprovalRequested, Namespace: "invoices", Key: "inv_4711", Summary: summary})
			if err != nil {
				t.Fatal(err)
			}
			var raw []cbor.RawMessage
			if err := cbor.Unmarshal(b, &raw); err != nil || arrayLen(b) != len(raw) {
				t.Fatalf("arrayLen = %d, the array has %d items (%v)", arrayLen(b), len(raw), err)
			}
			ev, err := decodeEvent(7, b)
			if err != nil || ev.Summary != summary || ev.Key != "inv_4711" {
				t.Fatalf("event read back as %+v, %v; want summary %q", ev, err, summary)
			}
		})
	}
}
