package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// newGatedSite is a console whose namespace "invoices" requires approval,
// with three invoices waiting, one of them requested by the console's
// own token name (four eyes).
func newGatedSite(t *testing.T) *site {
	t.Helper()
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"invoices": {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}
	s, store := siteOn(t, pol)
	for key, by := range map[string]string{"inv-1": "ann", "inv-2": "ann", "inv-3": "on-call"} {
		res, err := store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "invoices", Key: key, Owner: "n8n exec 7",
			RequestedBy: by, ResumeURL: "http://n8n.local/webhook-waiting/" + key, Fingerprint: "invoice " + key})
		if err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve %s: %+v %v", key, res, err)
		}
	}
	return s
}

// The approver's job in the console: see what waits, approve one, reject
// one with a reason (the page and the store refuse a rejection without
// one), and be refused approving what they requested themselves.
func TestBrowserApprovals(t *testing.T) {
	s := newGatedSite(t)
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.run("open approvals", chromedp.Navigate(s.url+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS(`#approvals`)))
	b.shot("approvals")
	if rows := get(b, "rows", chromedp.Evaluate[int](`document.querySelectorAll('#approvals tbody tr').length`)); rows != 3 {
		t.Fatalf("%d rows, want the 3 invoices waiting", rows)
	}
	if got := b.text(`#approval-inv-1`); !strings.Contains(got, "ann") {
		t.Errorf("row %q does not say who requested it", got)
	}

	b.run("approve inv-1",
		chromedp.Click(chromedp.CSS(`#approval-inv-1 button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#approval-done`)))
	if r := s.lookup("invoices", "inv-1"); r.Reason != keystore.ReasonApproved || r.ResolvedBy != "console: on-call" {
		t.Fatalf("inv-1 after approve: reason %s, by %q", r.Reason, r.ResolvedBy)
	}
	if b.exists(`#approval-inv-1`) {
		t.Error("an approved invoice is still listed")
	}

	// A rejection without a reason: the page stops it (required), and
	// without that attribute the store refuses it; nothing changes.
	b.run("reject without a reason",
		js(`document.getElementById('note-inv-2').removeAttribute('required')`),
		chromedp.Click(chromedp.CSS(`#approval-inv-2 button.reject`)),
		chromedp.WaitVisible(chromedp.CSS(`#approval-problem`)))
	if got := b.text(`#approval-problem`); !strings.Contains(got, "reason") {
		t.Errorf("problem %q does not ask for the reason", got)
	}
	if r := s.lookup("invoices", "inv-2"); r.Reason != keystore.ReasonAwaitingApproval {
		t.Fatalf("a rejection without reason changed inv-2: %s", r.Reason)
	}
	b.run("reject inv-2",
		chromedp.SendKeys(chromedp.CSS(`#note-inv-2`), "duplicate of INV-1041"),
		chromedp.Click(chromedp.CSS(`#approval-inv-2 button.reject`)),
		chromedp.WaitVisible(chromedp.CSS(`#approval-done`)))
	b.shot("after-reject")
	r := s.lookup("invoices", "inv-2")
	if r.Reason != keystore.ReasonApprovalRejected || r.Message != "duplicate of INV-1041" || r.Retryable {
		t.Fatalf("inv-2 after reject: %+v", r)
	}
	if h := r.History[len(r.History)-1]; h.Event != keystore.HistoryApprovalRejected || h.By != "console: on-call" || h.Detail != "duplicate of INV-1041" {
		t.Fatalf("history %+v: want who and why", h)
	}

	// Four eyes: the token that requested inv-3 may not approve it.
	b.run("approve own request",
		chromedp.Click(chromedp.CSS(`#approval-inv-3 button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#approval-problem`)))
	if got := b.text(`#approval-problem`); !strings.Contains(got, "four eyes") {
		t.Errorf("problem %q, want the four-eyes refusal", got)
	}
	if r := s.lookup("invoices", "inv-3"); r.Reason != keystore.ReasonAwaitingApproval {
		t.Fatalf("the requester approved inv-3: %s", r.Reason)
	}
}

// A token that may only read sees what waits and no buttons.
func TestBrowserApprovalsReadOnly(t *testing.T) {
	s := newGatedSite(t)
	b := newBrowser(t, s, 1280, 900)
	b.signIn(readToken)
	b.run("open approvals", chromedp.Navigate(s.url+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS(`#approvals`)))
	if b.exists(`button.approve`) || b.exists(`button.reject`) {
		t.Error("a read-only token sees Approve/Reject")
	}
}
