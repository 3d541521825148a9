package bolt

import (
	"reflect"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Breakers written by earlier releases (the plain, held and reset
// layouts) read back as they were, with their failure count and no
// digests; a breaker that counts failing keys keeps their digests, and
// one that counts none is written in the layout an earlier release reads.
func TestCodecKeepsTheBreakersOfEveryLayout(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	old := []struct {
		name string
		v    any
		want keystore.Breaker
	}{
		{"plain, two failures", earlierPlainBreaker{State: "closed", Failures: 2},
			keystore.Breaker{Destination: "crm", State: keystore.BreakerClosed, ConsecutiveFailures: 2}},
		{"held", earlierHeldBreaker{State: "open", OpenedAt: ms(at), ReopensAt: ms(at.Add(time.Hour)), HoldBy: "ops", HoldReason: "upgrade", HoldSetAt: ms(at), HoldUntil: ms(at.Add(time.Hour))},
			keystore.Breaker{Destination: "crm", State: keystore.BreakerOpen, OpenedAt: &at, ReopensAt: ptrTime(at.Add(time.Hour)),
				Maintenance: &keystore.Maintenance{By: "ops", Reason: "upgrade", SetAt: at, Until: at.Add(time.Hour)}}},
		{"reset", earlierResetBreaker{State: "closed", ResetBy: "ana", ResetReason: "fixed", ResetAt: ms(at)},
			keystore.Breaker{Destination: "crm", State: keystore.BreakerClosed, Reset: &keystore.BreakerReset{By: "ana", Reason: "fixed", At: at}}},
	}
	for _, tc := range old {
		t.Run("written by an earlier release: "+tc.name, func(t *testing.T) {
			v, err := cbor.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeBreaker("crm", v)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("read back %+v, want %+v", *got, tc.want)
			}
		})
	}

	counted := keystore.NewBreaker("crm")
	counted.ConsecutiveFailures = 2
	counted.FailedKeys = []string{keystore.FailedKeyDigest("crm-contacts", "evt_1"), keystore.FailedKeyDigest("billing", "evt_1")}
	counted.Reset = &keystore.BreakerReset{By: "ana", Reason: "fixed", At: at}
	v, err := encodeBreaker(counted)
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != 0x80|breakerCounted {
		t.Fatalf("a breaker with counted keys starts %#x, want the counted layout %#x", v[0], 0x80|breakerCounted)
	}
	got, err := decodeBreaker("crm", v)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, counted) {
		t.Fatalf("read back %+v, want %+v", got, counted)
	}

	// A breaker without counted keys is written byte for byte as an
	// earlier release wrote it, so that release reads it back.
	reset := keystore.NewBreaker("crm")
	reset.Reset = &keystore.BreakerReset{By: "ana", Reason: "fixed", At: at}
	if v, err = encodeBreaker(reset); err != nil {
		t.Fatal(err)
	}
	if want, _ := cbor.Marshal(earlierResetBreaker{State: "closed", ResetBy: "ana", ResetReason: "fixed", ResetAt: ms(at)}); string(v) != string(want) {
		t.Fatalf("a reset breaker is written %x, an earlier release wrote %x", v, want)
	}

	none := keystore.NewBreaker("crm")
	none.State = keystore.BreakerOpen
	none.OpenedAt, none.ReopensAt = &at, ptrTime(at.Add(time.Minute))
	none.ConsecutiveFailures = 5
	if v, err = encodeBreaker(none); err != nil {
		t.Fatal(err)
	}
	if v[0] != 0x80|8 {
		t.Fatalf("a breaker without counted keys starts %#x, want the plain layout an earlier release reads", v[0])
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

// The layouts earlier releases wrote, frozen: the first release's, then
// with a maintenance window, then reset by a person.
type earlierPlainBreaker struct {
	_              struct{} `cbor:",toarray"`
	State          string
	OpenedAt       int64
	ReopensAt      int64
	Failures       uint32
	Paused         uint32
	ProbeNamespace string
	ProbeKey       string
	ProbeUntil     int64
}

type earlierHeldBreaker struct {
	_              struct{} `cbor:",toarray"`
	State          string
	OpenedAt       int64
	ReopensAt      int64
	Failures       uint32
	Paused         uint32
	ProbeNamespace string
	ProbeKey       string
	ProbeUntil     int64
	HoldBy         string
	HoldReason     string
	HoldSetAt      int64
	HoldUntil      int64
}

type earlierResetBreaker struct {
	_              struct{} `cbor:",toarray"`
	State          string
	OpenedAt       int64
	ReopensAt      int64
	Failures       uint32
	Paused         uint32
	ProbeNamespace string
	ProbeKey       string
	ProbeUntil     int64
	HoldBy         string
	HoldReason     string
	HoldSetAt      int64
	HoldUntil      int64
	ResetBy        string
	ResetReason    string
	ResetAt        int64
}

// A breaker with namespaces' views and seen namespaces is written in the
// views layout and reads back whole; one written by the release before
// (counted keys, 16 fields) reads back with no view and none seen.
func TestCodecKeepsTheViewsOfABreaker(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	b := keystore.NewBreaker("ledger")
	b.ConsecutiveFailures = 2
	b.FailedKeys = []string{keystore.FailedKeyDigest("crm-contacts", "a"), keystore.FailedKeyDigest("crm-contacts", "b")}
	b.SeenNamespaces = []string{"payments", "crm-contacts"}
	b.OpenedBy = "crm-contacts"
	b.Views = []keystore.BreakerView{
		{Namespace: "crm-contacts", State: keystore.BreakerOpen, OpenedAt: &at, ReopensAt: ptrTime(at.Add(5 * time.Minute)), PausedReserves: 3,
			ProbeKey: "c", ProbeUntil: ptrTime(at.Add(time.Minute))},
		{Namespace: "payments", State: keystore.BreakerClosed, FailedKeys: []string{keystore.FailedKeyDigest("payments", "p")}},
	}
	v, err := encodeBreaker(b)
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != 0x80|breakerViews {
		t.Fatalf("a breaker with views starts %#x, want the views layout %#x", v[0], 0x80|breakerViews)
	}
	got, err := decodeBreaker("ledger", v)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("read back %+v, want %+v", got, b)
	}

	earlier := earlierCountedBreaker{State: "closed", Failures: 1, FailedKeys: []string{keystore.FailedKeyDigest("crm-contacts", "a")}}
	if v, err = cbor.Marshal(earlier); err != nil {
		t.Fatal(err)
	}
	if got, err = decodeBreaker("ledger", v); err != nil {
		t.Fatal(err)
	}
	if got.Views != nil || got.SeenNamespaces != nil || got.ConsecutiveFailures != 1 || len(got.FailedKeys) != 1 {
		t.Fatalf("a counted breaker of the release before read back as %+v", got)
	}
}

type earlierCountedBreaker struct {
	_              struct{} `cbor:",toarray"`
	State          string
	OpenedAt       int64
	ReopensAt      int64
	Failures       uint32
	Paused         uint32
	ProbeNamespace string
	ProbeKey       string
	ProbeUntil     int64
	HoldBy         string
	HoldReason     string
	HoldSetAt      int64
	HoldUntil      int64
	ResetBy        string
	ResetReason    string
	ResetAt        int64
	FailedKeys     []string
}
