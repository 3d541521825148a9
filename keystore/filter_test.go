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
