package bolt

import (
	"reflect"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// An event written by an earlier release reads back as it was; an event
// of no bulk is written byte for byte as that release wrote it, and one
// of a bulk keeps the bulk's id.
func TestCodecKeepsEventsOfEveryLayout(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	earlier := earlierEvent{At: ms(at), Kind: "key_resolved", Namespace: "crm", Key: "ord-1", Attempt: 2, Owner: "ann", Message: "failed"}
	v, err := cbor.Marshal(earlier)
	if err != nil {
		t.Fatal(err)
	}
	single := keystore.Event{Seq: 7, At: at, Kind: keystore.EventKeyResolved, Namespace: "crm", Key: "ord-1", Attempt: 2, Owner: "ann", Message: "failed"}
	got, err := decodeEvent(7, v)
	if err != nil || !reflect.DeepEqual(got, single) {
		t.Fatalf("an earlier release's event read back %+v (%v), want %+v", got, err, single)
	}
	if w, err := encodeEvent(single); err != nil || string(w) != string(v) {
		t.Fatalf("an event of no bulk is written %x (%v), an earlier release wrote %x", w, err, v)
	}

	bulk := single
	bulk.Bulk = "b-0000beef"
	w, err := encodeEvent(bulk)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = decodeEvent(7, w); err != nil || !reflect.DeepEqual(got, bulk) {
		t.Fatalf("an event of a bulk read back %+v (%v), want %+v", got, err, bulk)
	}
}

// TestCodecKeepsBulkActionsOfEveryLayout: a bulk action kept by an earlier
// release (its content and start) reads back without the words, one kept
// before re-runs without its re-run; one kept now keeps who, the note, the
// resolution, whether it is final and whether it re-ran the executions.
func TestCodecKeepsBulkActionsOfEveryLayout(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	v, err := cbor.Marshal(earlierBulk{Content: []byte{1, 2, 3}, At: ms(at)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBulk("b-1", v)
	if want := (keystore.BulkAction{ID: "b-1", Content: []byte{1, 2, 3}, At: at}); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("an earlier release's bulk action read back %+v (%v), want %+v", got, err, want)
	}
	words, err := cbor.Marshal([]any{[]byte{5}, ms(at), "bob", "words", "failed", false}) // before re-runs
	if err != nil {
		t.Fatal(err)
	}
	got, err = decodeBulk("b-3", words)
	if want := (keystore.BulkAction{ID: "b-3", Content: []byte{5}, At: at, By: "bob", Note: "words", Resolution: keystore.StateFailed}); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a bulk action kept before re-runs read back %+v (%v), want %+v", got, err, want)
	}
	now := keystore.BulkAction{ID: "b-2", Content: []byte{4}, At: at, By: "ann", Note: "incident", Resolution: keystore.StateFailed, Rerun: true}
	w, err := encodeBulk(&now)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = decodeBulk("b-2", w); err != nil || !reflect.DeepEqual(got, now) {
		t.Fatalf("a bulk action read back %+v (%v), want %+v", got, err, now)
	}
}

// The layouts an earlier release wrote, frozen.
type earlierEvent struct {
	_           struct{} `cbor:",toarray"`
	At          int64
	Kind        string
	Namespace   string
	Key         string
	Attempt     uint32
	Owner       string
	Destination string
	Reason      string
	Message     string
	ReopensAt   int64
	Paused      uint32
}

type earlierBulk struct {
	_       struct{} `cbor:",toarray"`
	Content []byte
	At      int64
}

// An event is written in the shortest layout that holds what it carries:
// neither bulk nor summary in the first release's 11 items (an earlier
// release reads it), a bulk in 12, a summary in 13, a catch-up's figures
// in 16; each reads back.
func TestCodecWritesTheShortestEventLayout(t *testing.T) {
	at := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ev    keystore.Event
		items int
	}{
		{keystore.Event{At: at, Kind: keystore.EventKeyResolved, Namespace: "crm", Key: "k1"}, eventBase},
		{keystore.Event{At: at, Kind: keystore.EventKeyResolved, Namespace: "crm", Key: "k1", Bulk: "b-1"}, eventBulk},
		{keystore.Event{At: at, Kind: keystore.EventApprovalRequested, Namespace: "crm", Key: "k1", Summary: "Invoice 4711"}, eventSummary},
		{keystore.Event{At: at, Kind: keystore.EventKeyResolved, Namespace: "crm", Key: "k1", Bulk: "b-1", Summary: "Invoice 4711"}, eventSummary},
		{keystore.Event{At: at, Kind: keystore.EventCaughtUp, Key: "k1", Resumed: 35, Lost: 2, Took: 136 * time.Second}, eventCatchUp},
	} {
		b, err := encodeEvent(tc.ev)
		if err != nil {
			t.Fatal(err)
		}
		var raw []cbor.RawMessage
		if err := cbor.Unmarshal(b, &raw); err != nil || len(raw) != tc.items {
			t.Fatalf("bulk %q, summary %q: %d items (%v), want %d", tc.ev.Bulk, tc.ev.Summary, len(raw), err, tc.items)
		}
		got, err := decodeEvent(1, b)
		if err != nil || got.Bulk != tc.ev.Bulk || got.Summary != tc.ev.Summary || got.Key != "k1" || !got.At.Equal(at) ||
			got.Resumed != tc.ev.Resumed || got.Lost != tc.ev.Lost || got.Took != tc.ev.Took {
			t.Fatalf("read back %+v, %v", got, err)
		}
	}
}
