package keystore

import (
	"testing"
	"time"
)

// How many namespaces must agree before failures pause a destination for
// every namespace: one where the failing namespace is the only one known
// to use it (configured alone, or the only one seen), else two.
func TestAgreementNeeded(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured []string
		seen       []string
		want       int
	}{
		{"configured for crm alone", []string{"crm"}, []string{"crm", "payments"}, 1},
		{"configured for crm and payments, payments never seen", []string{"crm", "payments"}, []string{"crm"}, 2},
		{"configured for payments alone (crm is refused before)", []string{"payments"}, nil, 2},
		{"not configured, nobody seen (a breaker from before)", nil, nil, 1},
		{"not configured, crm the only one seen", nil, []string{"crm"}, 1},
		{"not configured, payments the only one seen", nil, []string{"payments"}, 2},
		{"not configured, two seen", nil, []string{"payments", "crm"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Breaker{Destination: "ledger", State: BreakerClosed, SeenNamespaces: tc.seen}
			if got := b.agreementNeeded("crm", DestinationPolicy{Namespaces: tc.configured}); got != tc.want {
				t.Fatalf("agreement needed %d, want %d", got, tc.want)
			}
		})
	}
}

// Of the namespaces seen, only the first two are kept, each once.
func TestSeeKeepsTheFirstTwoNamespaces(t *testing.T) {
	b := NewBreaker("ledger")
	for _, ns := range []string{"crm", "crm", "payments", "bookings"} {
		b.see(ns)
	}
	if len(b.SeenNamespaces) != 2 || b.SeenNamespaces[0] != "crm" || b.SeenNamespaces[1] != "payments" {
		t.Fatalf("seen %v, want [crm payments]", b.SeenNamespaces)
	}
}

// Views round-trip through their stored form, every field.
func TestViewsStoredForm(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	in := []BreakerView{{Namespace: "crm", State: BreakerOpen, OpenedAt: &at, ReopensAt: timePtr(at.Add(time.Minute)), PausedReserves: 2,
		ProbeKey: "k", ProbeUntil: timePtr(at.Add(time.Second))}, {Namespace: "payments", State: BreakerClosed, FailedKeys: []string{"ab"}}}
	out, err := DecodeViews(EncodeViews(in))
	if err != nil || len(out) != 2 || out[0].ProbeKey != "k" || !out[0].ReopensAt.Equal(*in[0].ReopensAt) || out[1].FailedKeys[0] != "ab" {
		t.Fatalf("read back %+v %v", out, err)
	}
	if EncodeViews(nil) != nil {
		t.Fatal("no views are stored as nothing")
	}
}
