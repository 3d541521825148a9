package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

func TestFilterNormalizeRefusesBadInput(t *testing.T) {
	now := time.Now()
	for name, f := range map[string]keystore.Filter{
		"state":     {States: []keystore.State{"lost"}},
		"namespace": {Namespace: "bad namespace!"},
		"range":     {From: now, To: now.Add(-time.Hour)},
	} {
		if _, err := f.Normalize(); errs.CodeOf(err) != errs.InvalidRequest {
			t.Errorf("%s: err %v, want invalid_request", name, err)
		}
	}
	if _, err := (keystore.Filter{States: []keystore.State{keystore.StateUnknown}, Holder: " LeadCrm "}).Normalize(); err != nil {
		t.Fatal(err)
	}
}

func TestFilterMatch(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := &keystore.Record{Namespace: "crm", Key: "Order-42", State: keystore.StateUnknown, Owner: "n8n LeadCrm exec 48016",
		Destination: "hubspot", Reason: keystore.ReasonOutcomeUnknown, UpdatedAt: t0}
	yes := []keystore.Filter{{}, {Namespace: "crm"}, {Holder: "leadcrm"}, {Text: "der-4"}, {KeyPrefix: "Order-"},
		{States: []keystore.State{keystore.StateFailed, keystore.StateUnknown}}, {From: t0, To: t0.Add(time.Second)}, {Destination: "hubspot", Reason: keystore.ReasonOutcomeUnknown}}
	no := []keystore.Filter{{Namespace: "mail"}, {Holder: "other"}, {Text: "43"}, {KeyPrefix: "order-"},
		{States: []keystore.State{keystore.StateFailed}}, {From: t0.Add(time.Second)}, {To: t0}, {Destination: "sf"}, {Reason: keystore.ReasonLeaseExpired}}
	for _, f := range yes {
		if !f.Match(r) {
			t.Errorf("%+v does not match", f)
		}
	}
	for _, f := range no {
		if f.Match(r) {
			t.Errorf("%+v matches", f)
		}
	}
}

func TestFilterQueryRoundTrip(t *testing.T) {
	f := keystore.Filter{Namespace: "crm", Destination: "hubspot", States: []keystore.State{keystore.StateUnknown, keystore.StateFailed},
		Reason: keystore.ReasonOutcomeUnknown, Holder: "LeadCrm", KeyPrefix: "ord-", Text: "42",
		From: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	got, err := keystore.FilterFromQuery(f.Query(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Query().Encode() != f.Query().Encode() {
		t.Fatalf("round trip: %v, want %v", got.Query(), f.Query())
	}
	berlin := time.FixedZone("CET", 3600)
	got, err = keystore.FilterFromQuery(map[string][]string{"from": {"2026-12-01T10:00"}}, berlin)
	if err != nil || !got.From.Equal(f.From.Add(0)) {
		t.Fatalf("datetime-local in CET: %v %v, want %v", got.From, err, f.From)
	}
	bad, err := keystore.FilterFromQuery(map[string][]string{"from": {"yesterday"}, "text": {"kept"}}, nil)
	if errs.CodeOf(err) != errs.InvalidRequest || bad.Text != "kept" {
		t.Fatalf("bad time: %v, filter %+v", err, bad)
	}
}
