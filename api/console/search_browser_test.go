package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A person pastes a key without its namespace and finds it in two; then
// sends a search the server refuses and finds everything typed still there.
func TestBrowserSearchWithoutNamespaceAndBadInputKept(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-0042", "n8n LeadCrm exec 4711", "timeout")
	s.unknownKey("crm", "bk-0042", "n8n LeadCrm exec 9", "the same key in another namespace")
	s.completedBy("crm", "bk-0043", "n8n LeadCrm exec 10")
	s.unknownKey("crm", "zz-0042", "n8n exec 5", "another prefix")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.run("search without namespace",
		chromedp.Navigate(s.url+"/ui/keys"),
		chromedp.WaitVisible(chromedp.CSS(`#search-form`)),
		chromedp.SendKeys(chromedp.CSS(`#f-key`), "bk-0042"),
		chromedp.Submit(chromedp.CSS(`#f-key`)),
		chromedp.WaitVisible(chromedp.CSS(`#results`)))
	b.shot("without-namespace")
	rows := get(b, "rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#results tbody tr')].map(r => r.cells[1].textContent.trim() + '/' + r.cells[0].textContent.trim())`))
	if !sameSet(rows, "bookings/bk-0042", "crm/bk-0042") {
		t.Fatalf("rows %v: want the key in both namespaces", rows)
	}
	if got := b.text(`#page-count`); !strings.HasPrefix(got, "2 keys on this page") {
		t.Errorf("count %q", got)
	}
	if !b.exists(`#bulk-link`) {
		t.Error("no link to decide all matching keys")
	}

	long := strings.Repeat("LeadCrm ", 20) // 160 characters: over the holder's 128
	b.run("send a holder too long",
		chromedp.SetValue(chromedp.CSS(`#f-key`), "bk-00"),
		chromedp.SetValue(chromedp.CSS(`#f-state`), "unknown"),
		chromedp.SendKeys(chromedp.CSS(`#f-holder`), long),
		chromedp.SetValue(chromedp.CSS(`#f-from`), "2026-11-30T10:00"),
		chromedp.Submit(chromedp.CSS(`#f-key`)),
		chromedp.WaitVisible(chromedp.CSS(`#search-problem`)))
	b.shot("bad-input-kept")
	if got := b.text(`#search-problem`); !strings.Contains(got, "holder must be at most 128") {
		t.Errorf("problem shown %q", got)
	}
	for sel, want := range map[string]string{`#f-key`: "bk-00", `#f-state`: "unknown", `#f-holder`: long, `#f-from`: "2026-11-30T10:00", `#f-namespace`: ""} {
		if got := get(b, "value of "+sel, chromedp.Value(chromedp.CSS(sel))); got != want {
			t.Errorf("%s holds %q after the refusal, typed %q", sel, got, want)
		}
	}
	if b.exists(`#results`) {
		t.Error("a refused search shows results")
	}
	if !b.exists(`#f-holder[aria-invalid=true]`) {
		t.Error("the holder is not marked as the field at fault")
	}
	b.run("correct it",
		chromedp.SetValue(chromedp.CSS(`#f-holder`), "leadcrm"),
		chromedp.SetValue(chromedp.CSS(`#f-from`), ""),
		chromedp.Submit(chromedp.CSS(`#f-key`)),
		chromedp.WaitVisible(chromedp.CSS(`#results`)))
	rows = get(b, "rows after", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#results tbody tr')].map(r => r.cells[1].textContent.trim() + '/' + r.cells[0].textContent.trim())`))
	if !sameSet(rows, "bookings/bk-0042", "crm/bk-0042") {
		t.Fatalf("rows %v: want the two unknown keys whose holder names LeadCrm", rows)
	}
	b.shot("corrected")
}
