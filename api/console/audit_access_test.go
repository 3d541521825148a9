package console_test

import (
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A reader limited to namespaces sees, of a bulk decision that spanned
// other namespaces too, one row for the keys of its own namespaces (their
// count, not the whole bulk's), wherever the bulk's newest key is; and
// the page of a bulk that decided none of its keys tells it nothing: not
// who decided, not the reason.
// Mutation tried: the row read by its newest key only (the limited reader
// saw no row for its two keys, or the count of the other namespace's).
func TestAuditShowsALimitedReaderOnlyItsNamespacesOfABulk(t *testing.T) {
	s := newSite(t)
	s.unknownKeys("bookings", "x", "n8n Bookings", 2)
	s.unknownKeys("crm", "x", "n8n Crm", 3)
	s.unknownKeys("crm", "only", "n8n Crm", 2)
	// An unlimited person's bulk over both namespaces (the crm keys are
	// decided last: the bulk's newest event is one the reader may not see).
	if _, err := keystore.ResolveMany(s.ctx, s.store, keystore.BulkResolveRequest{Filter: keystore.Filter{KeyPrefix: "x-"},
		Resolution: keystore.StateFailed, By: "ann@example.com", Note: "both teams' incident", ID: "b-000both"}); err != nil {
		t.Fatal(err)
	}
	// A bulk of crm keys only, its reason the crm team's business.
	if _, err := keystore.ResolveMany(s.ctx, s.store, keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm", KeyPrefix: "only-"},
		Resolution: keystore.StateCompleted, By: "carl@example.com", Note: "crm-internal: merger account 99", ID: "b-0000crm"}); err != nil {
		t.Fatal(err)
	}

	c, _ := signedIn(t, s, limitedToken)
	_, page := fetch(t, c, s.url+"/ui/audit")
	rows := auditRows(page)
	if len(rows) != 1 || !strings.Contains(rows[0], `data-bulk="b-000both"`) || !strings.Contains(rows[0], "2 keys (bulk b-000both)") ||
		!strings.Contains(rows[0], "2 events") {
		t.Errorf("the limited reader's audit, want one row of the bulk's 2 bookings keys:\n%s", strings.Join(rows, "\n"))
	}
	if strings.Contains(page, "b-0000crm") || strings.Contains(page, "merger") || strings.Contains(page, "5 keys") {
		t.Errorf("the limited reader's audit shows what it may not read:\n%s", page)
	}

	_, page = fetch(t, c, s.url+"/ui/audit?bulk=b-0000crm")
	if strings.Contains(page, "merger") || strings.Contains(page, "carl@example.com") || strings.Contains(page, `id="bulk-summary"`) {
		t.Errorf("the page of a bulk of another namespace tells the limited reader who decided and why:\n%s", page)
	}
	if rows := auditRows(page); len(rows) != 0 {
		t.Errorf("the page of a bulk of another namespace lists %d keys", len(rows))
	}

	// Unlimited, the same audit shows both bulks whole.
	c, _ = signedIn(t, s, actToken)
	_, page = fetch(t, c, s.url+"/ui/audit")
	if !strings.Contains(page, "5 keys (bulk b-000both)") || !strings.Contains(page, "2 keys (bulk b-0000crm)") {
		t.Errorf("the unlimited reader's audit, want both bulks whole:\n%s", strings.Join(auditRows(page), "\n"))
	}
}
