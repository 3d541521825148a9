package console_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// unknownKeys makes n unknown keys ns/<prefix>-0000.. held by holder, in
// parallel (bbolt commits the writes that wait together).
func (s *site) unknownKeys(ns, prefix, holder string, n int) {
	s.t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				key := fmt.Sprintf("%s-%04d", prefix, i)
				res, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: fmt.Sprintf("%s exec %d", holder, i)})
				if err == nil {
					_, err = s.store.Fail(s.ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token, Reason: keystore.ReasonOutcomeUnknown})
				}
				if err != nil {
					s.t.Error(err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// confirmForm reads the hidden fields of the confirmation form.
func confirmForm(t *testing.T, page string) url.Values {
	t.Helper()
	i := strings.Index(page, `id="bulk-confirm"`)
	if i < 0 {
		t.Fatalf("no confirmation on the page:\n%s", page)
	}
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(page[i:], -1) {
		form.Set(m[1], htmlUnescape(m[2]))
	}
	return form
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#43;", "+", "&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(s)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string, string) {
	t.Helper()
	resp := postForm(t, c, u, form)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header.Get("Location")
}

// The bulk page over plain HTTP: the question carries the count and the
// bulk id, a second confirmation decides nothing twice, a changed count
// is asked about again, and roles and namespaces are kept.
func TestBulkPageConfirmsTheCount(t *testing.T) {
	s := newSite(t)
	s.unknownKeys("bookings", "bk", "n8n Bookings", 30)
	s.unknownKey("crm", "bk-0000", "n8n Bookings exec 1", "another namespace")
	c, csrf := signedIn(t, s, actToken)
	filter := url.Values{"namespace": {"bookings"}, "state": {"unknown"}}.Encode()

	_, page := fetch(t, c, s.url+"/ui/bulk?"+filter)
	if !strings.Contains(page, `<strong id="bulk-matched">30</strong>`) || !strings.Contains(page, `id="bulk-form"`) {
		t.Fatalf("the page does not count 30 keys or offers no form:\n%s", page)
	}
	status, page, _ := post(t, c, s.url+"/ui/bulk", url.Values{"csrf": {csrf}, "filter": {filter}, "action": {"retry"}, "note": {"CRM incident"}})
	if status != http.StatusOK || !strings.Contains(page, "Allow 30 events to be sent again?") {
		t.Fatalf("first POST: %d, want the question with the count:\n%s", status, page)
	}
	if n := len(s.selectAll(keystore.Filter{Namespace: "bookings", States: []keystore.State{keystore.StateUnknown}})); n != 30 {
		t.Fatalf("the question decided: %d unknown keys left", n)
	}
	confirm := confirmForm(t, page)

	// Meanwhile two more keys go unknown: the confirmation asks again.
	s.unknownKey("bookings", "bk-late-1", "n8n Bookings exec 91", "")
	s.unknownKey("bookings", "bk-late-2", "n8n Bookings exec 92", "")
	status, page, _ = post(t, c, s.url+"/ui/bulk", confirm)
	if status != http.StatusOK || !strings.Contains(page, "The count changed from 30 to 32") || !strings.Contains(page, "Allow 32 events to be sent again?") {
		t.Fatalf("a changed count was not asked about again: %d\n%s", status, page)
	}
	if n := len(s.selectAll(keystore.Filter{Namespace: "bookings", States: []keystore.State{keystore.StateUnknown}})); n != 32 {
		t.Fatalf("a changed count decided: %d unknown keys left", n)
	}
	confirm = confirmForm(t, page)
	status, _, loc := post(t, c, s.url+"/ui/bulk", confirm)
	if status != http.StatusSeeOther || !strings.Contains(loc, "decided=32") {
		t.Fatalf("confirm: %d %s", status, loc)
	}
	r := s.lookup("bookings", "bk-0007")
	last := r.History[len(r.History)-1]
	if r.State != keystore.StateFailed || last.By != "console: on-call" || last.Detail != "bulk "+confirm.Get("id")+", failed: CRM incident" {
		t.Fatalf("bk-0007 after the bulk: %s %+v", r.State, last)
	}
	if r := s.lookup("crm", "bk-0000"); r.State != keystore.StateUnknown {
		t.Fatalf("a key of another namespace was decided: %s", r.State)
	}
	// The same confirmation again (a double click, a reload): it counts 0
	// to decide and asks, deciding nothing.
	before := s.lookup("bookings", "bk-0007")
	status, page, _ = post(t, c, s.url+"/ui/bulk", confirm)
	if status != http.StatusOK || !strings.Contains(page, "The count changed from 32 to 0") {
		t.Fatalf("a repeated confirmation: %d\n%s", status, page)
	}
	if after := s.lookup("bookings", "bk-0007"); len(after.History) != len(before.History) {
		t.Fatalf("a repeated confirmation changed the history: %+v", after.History)
	}

	t.Run("refused: no reason, no selection, a read role, a namespace outside the role", func(t *testing.T) {
		for name, form := range map[string]url.Values{
			"no reason":    {"filter": {"namespace=crm"}, "action": {"retry"}},
			"no action":    {"filter": {"namespace=crm"}, "note": {"x"}},
			"no selection": {"filter": {""}, "action": {"retry"}, "note": {"x"}},
			"bad filter":   {"filter": {"namespace=crm&state=lost"}, "action": {"retry"}, "note": {"x"}},
		} {
			form.Set("csrf", csrf)
			if status, page, _ := post(t, c, s.url+"/ui/bulk", form); status != http.StatusBadRequest || !strings.Contains(page, `id="bulk-problem"`) {
				t.Errorf("%s: %d, want 400 with the problem on the page", name, status)
			}
		}
		rc, rcsrf := signedIn(t, s, readToken)
		if status, _, _ := post(t, rc, s.url+"/ui/bulk", url.Values{"csrf": {rcsrf}, "filter": {"namespace=crm"}, "action": {"retry"}, "note": {"x"}, "confirm": {"1"}, "count": {"1"}}); status != http.StatusForbidden {
			t.Errorf("a read role decided: %d", status)
		}
		lc, lcsrf := signedIn(t, s, limitedToken)
		for _, f := range []string{"state=unknown", "namespace=crm"} {
			if status, _, _ := post(t, lc, s.url+"/ui/bulk", url.Values{"csrf": {lcsrf}, "filter": {f}, "action": {"retry"}, "note": {"x"}, "confirm": {"1"}, "count": {"1"}}); status != http.StatusForbidden {
				t.Errorf("a role limited to bookings decided over %s: %d", f, status)
			}
		}
		if r := s.lookup("crm", "bk-0000"); r.State != keystore.StateUnknown {
			t.Fatalf("a refused bulk decided crm/bk-0000: %s", r.State)
		}
	})
}

func (s *site) selectAll(f keystore.Filter) []*keystore.Record {
	s.t.Helper()
	var out []*keystore.Record
	for cursor := ""; ; {
		page, err := keystore.Select(s.ctx, s.store, f, cursor, 1000)
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, page.Items...)
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}
