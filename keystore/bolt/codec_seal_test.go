package bolt

import (
	"bytes"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The token seal rides in the token-hash field, so records written before
// it existed (a 16-byte hash) and records without a request_id read back
// with no seal, and a sealed one reads back with both parts.
func TestCodecKeepsTheTokenSeal(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	hash := bytes.Repeat([]byte{0xab}, tokenHashLen)
	seal := bytes.Repeat([]byte{0xcd}, tokenHashLen)
	for name, in := range map[string][]byte{"no seal": nil, "sealed": seal} {
		t.Run(name, func(t *testing.T) {
			r := &keystore.Record{Namespace: "crm-contacts", Key: "evt_1", State: keystore.StateReserved, Attempt: 1,
				CreatedAt: now, UpdatedAt: now, LeaseExpiresAt: &now, TokenHash: hash, TokenSeal: in}
			b, err := encodeRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeRecord("crm-contacts", "evt_1", b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.TokenHash, hash) || !bytes.Equal(got.TokenSeal, in) {
				t.Fatalf("hash %x seal %x, want %x and %x", got.TokenHash, got.TokenSeal, hash, in)
			}
		})
	}
}
