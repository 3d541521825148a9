package console_test

import (
	"slices"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// An approval is a person's decision: the audit list reads it from the
// event log (DecisionKinds) and names who approved or rejected which key.
// Mutation tried: EventApprovalDecided left out of DecisionKinds.
func TestAuditListsApprovals(t *testing.T) {
	if !slices.Contains(keystore.DecisionKinds, keystore.EventApprovalDecided) {
		t.Fatal("the audit list does not ask the event log for approvals")
	}
	ev := keystore.Event{At: time.Now(), Kind: keystore.EventApprovalDecided, Namespace: "invoices", Key: "inv-3",
		Owner: "bob@example.com (console, OIDC)", Message: "rejected"}
	it, ok := console.AuditOf(ev)
	if !ok || it.Who != "bob@example.com (console, OIDC)" || it.What != "rejected the event (approval)" || it.Namespace != "invoices" || it.Key != "inv-3" {
		t.Fatalf("audit item %+v (%v), want bob rejected invoices/inv-3", it, ok)
	}
}
