package postgres

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A record without park fields hashes as it did before migration 0005
// (the value below is what that version computed): rows written then still
// verify. A park field set changes the checksum.
func TestChecksumOfRowsFromBeforeParking(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	lease := at.Add(time.Minute)
	r := &keystore.Record{Namespace: "crm", Key: "evt_1", State: keystore.StateReserved, Attempt: 2, Owner: "n8n",
		LeaseExpiresAt: &lease, Destination: "hubspot", CreatedAt: at, UpdatedAt: at, Message: "m",
		History:     []keystore.Transition{{At: at, Event: keystore.HistoryReserved, Attempt: 1, By: "n8n"}},
		Fingerprint: keystore.Fingerprint("fp"), TokenHash: []byte("hash"), TokenSeal: []byte("seal")}
	const before = int64(156149686)
	if got := rowChecksum(r, 3); got != before {
		t.Fatalf("a record without park fields: checksum %d, want %d (as written before parking)", got, before)
	}
	parked := *r
	parked.ResumeURL = "http://n8n/webhook-waiting/1"
	if rowChecksum(&parked, 3) == before {
		t.Fatal("resume_url is not in the checksum")
	}
}
