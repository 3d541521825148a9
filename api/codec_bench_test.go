package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The API's own work per reserve, without network or store: decode,
// the domain's rules (as the store applies them), encode the answer.
func BenchmarkReserveCodec(b *testing.B) {
	body := []byte(`{"namespace":"crm-contacts","key":"evt_123","owner":"n8n exec 4711","lease_seconds":300,"payload":{"email_hash":"9f86d081884c7d65"},"destination":"hubspot"}`)
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	lease := now.Add(5 * time.Minute)
	rec := &keystore.Record{Namespace: "crm-contacts", Key: "evt_123", State: keystore.StateReserved, Attempt: 1,
		Owner: "n8n exec 4711", LeaseExpiresAt: &lease, Destination: "hubspot", CreatedAt: now, UpdatedAt: now,
		History: []keystore.Transition{{At: now, Event: "reserved", Attempt: 1, By: "n8n exec 4711"}}}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			var req reserveRequest
			if err := decodeJSON(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("validate", func(b *testing.B) {
		var req reserveRequest
		decodeJSON(body, &req)
		for b.Loop() {
			dr, err := req.domain()
			if err == nil {
				_, _, err = dr.Normalize()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(Answer{Outcome: keystore.OutcomeAccepted, Proceed: true, Token: "1.5f0c2a9e8d7b6a5f4e3d2c1b0a998877", Record: rec}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
