package console_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A CRM incident in the browser: 2,000 unknown keys held by one workflow
// are found by a filter, counted (a dry run), confirmed with the count,
// and decided at once; every key's history names the bulk and the person.
func TestBrowserBulkDecision(t *testing.T) {
	s := newSite(t)
	s.unknownKeys("crm", "lead", "n8n LeadCrm", 2000)
	live, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "crm", Key: "lead-live", Owner: "n8n LeadCrm exec 9999"})
	if err != nil || live.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("reserve lead-live: %v %v", live.Outcome, err)
	}
	s.unknownKey("crm", "other-1", "n8n Orders exec 1", "another workflow")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)

	b.run("open the bulk page filtered",
		chromedp.Navigate(s.url+"/ui/bulk?namespace=crm&holder=leadcrm"),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-count`)))
	b.shot("count")
	if got := b.text(`#bulk-matched`); got != "2,001" {
		t.Fatalf("matched %q, want 2,001 (2,000 unknown and one live)", got)
	}
	if got := b.text(`#bulk-decidable`); got != "2,000" {
		t.Fatalf("decidable %q, want 2,000", got)
	}
	if got := b.text(`#bulk-skipped`); !strings.Contains(got, "1: an attempt holds a live lease") {
		t.Fatalf("skipped %q, want the live lease named", got)
	}
	if rows := get(b, "sample rows", chromedp.Evaluate[int](`document.querySelectorAll('#bulk-sample tbody tr').length`)); rows != 20 {
		t.Fatalf("sample of %d rows, want 20", rows)
	}

	b.run("review",
		chromedp.Click(chromedp.CSS(`input[name=action][value=retry]`)),
		chromedp.SendKeys(chromedp.CSS(`#bulk-note`), "CRM incident 4711: nothing reached the CRM, retry after the fix"),
		chromedp.Click(chromedp.CSS(`#bulk-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-confirm`)))
	b.shot("confirm")
	if got := b.text(`#bulk-question`); got != "Allow 2,000 events to be sent again?" {
		t.Fatalf("question %q", got)
	}
	if got := b.text(`#bulk-then`); !strings.Contains(got, "This re-runs nothing") {
		t.Errorf("the question does not say that nothing is re-run: %q", got)
	}
	if n := len(s.selectAll(keystore.Filter{Namespace: "crm", States: []keystore.State{keystore.StateUnknown}})); n != 2001 {
		t.Fatalf("the question decided: %d unknown keys left", n)
	}

	b.run("confirm",
		chromedp.Click(chromedp.CSS(`#bulk-confirm-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-done`)))
	b.shot("done")
	done := b.text(`#bulk-done`)
	if !strings.HasPrefix(done, "Decided 2,000 keys (bulk b-") {
		t.Fatalf("done %q", done)
	}
	id := strings.TrimSuffix(strings.Fields(done)[4], ");")
	if got := b.text(`#bulk-skipped`); b.text(`#bulk-decidable`) != "0" || !strings.Contains(got, "2,000: already decided this way") {
		t.Fatalf("after the decision the page counts %s decidable, skipped %q: want 0 and the 2,000 named as decided", b.text(`#bulk-decidable`), got)
	}
	if left := s.selectAll(keystore.Filter{Namespace: "crm", States: []keystore.State{keystore.StateUnknown}}); len(left) != 1 || left[0].Key != "other-1" {
		t.Fatalf("unknown keys left: %d, want only other-1", len(left))
	}
	for _, i := range []int{0, 1, 777, 1999} {
		r := s.lookup("crm", fmt.Sprintf("lead-%04d", i))
		last := r.History[len(r.History)-1]
		if r.State != keystore.StateFailed || !r.Retryable || last.By != "console: on-call" ||
			last.Detail != "bulk "+id+", failed: CRM incident 4711: nothing reached the CRM, retry after the fix" {
			t.Fatalf("lead-%04d: %s %+v", i, r.State, last)
		}
	}
	if r := s.lookup("crm", "lead-live"); r.State != keystore.StateReserved {
		t.Fatalf("the live key was decided: %s", r.State)
	}
	b.openKey("crm", "lead-0777", `#history`)
	if got := b.text(`#history tbody tr:first-child`); !strings.Contains(got, "bulk "+id) || !strings.Contains(got, "console: on-call") {
		t.Fatalf("the key page's newest history row %q does not name the bulk and the person", got)
	}
	b.shot("key-history")

	// The audit shows the decision once: one row for 2,000 keys, with
	// the person, what it did, the reason and a link to its keys.
	b.run("audit", chromedp.Navigate(s.url+"/ui/audit"), chromedp.WaitVisible(chromedp.CSS(`#audit`)))
	b.shot("audit")
	rows := get(b, "audit rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#audit tbody tr')].map(tr => tr.textContent.replace(/\s+/g, ' ').trim())`))
	if len(rows) != 1 {
		t.Fatalf("%d audit rows for one bulk decision, want 1: %q", len(rows), rows)
	}
	for _, want := range []string{"console: on-call", "allowed 2,000 events to be sent again", "Reason: CRM incident 4711", "2,000 keys (bulk " + id + ")"} {
		if !strings.Contains(rows[0], want) {
			t.Errorf("the bulk's audit row %q lacks %q", rows[0], want)
		}
	}
	b.run("the bulk's keys", chromedp.Click(chromedp.CSS(`#audit tr.audit-bulk td.key a`)), chromedp.WaitVisible(chromedp.CSS(`#bulk-summary`)))
	b.shot("audit-bulk-keys")
	if n := get(b, "key rows", chromedp.Evaluate[int](`document.querySelectorAll('#audit tbody tr').length`)); n != 200 {
		t.Errorf("the bulk's first page lists %d keys, want 200 (a page)", n)
	}
}
