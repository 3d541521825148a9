package console_test

import (
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// The search page as people search: a key or a prefix without its
// namespace, the holder by a part of its name (completed keys too), a time
// range read in the reader's time zone, and bad input shown on the page
// with everything typed kept. Real bbolt, real HTTP.

// clockSite is a site whose store's clock the test moves.
type clockSite struct {
	*site
	mu  sync.Mutex
	now time.Time
}

func newClockSite(t *testing.T, start time.Time) *clockSite {
	t.Helper()
	cs := &clockSite{now: start}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Clock: cs.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s, stop, err := serve(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t
	cs.site = s
	return cs
}

func (cs *clockSite) clock() time.Time {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.now
}

func (cs *clockSite) set(t time.Time) {
	cs.mu.Lock()
	cs.now = t
	cs.mu.Unlock()
}

// completedBy writes a key that holder reserved and completed.
func (s *site) completedBy(ns, key, holder string) {
	s.t.Helper()
	res, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: holder})
	if err != nil || res.Outcome != keystore.OutcomeAccepted {
		s.t.Fatalf("reserve %s: %v %v", key, res.Outcome, err)
	}
	if _, err := s.store.Complete(s.ctx, keystore.CompleteRequest{Namespace: ns, Key: key, Token: res.Token}); err != nil {
		s.t.Fatal(err)
	}
}

var resultRowRE = regexp.MustCompile(`(?s)<tr class="result">(.*?)</tr>`)
var resultKeyRE = regexp.MustCompile(`href="/ui/key\?([^"]+)"`)

// results are the namespace/key of every row of the results table.
func results(t *testing.T, page string) []string {
	t.Helper()
	var out []string
	for _, row := range resultRowRE.FindAllStringSubmatch(page, -1) {
		m := resultKeyRE.FindStringSubmatch(row[1])
		if m == nil {
			t.Fatalf("a result row without a link to its key: %s", row[1])
		}
		q, err := url.ParseQuery(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, q.Get("namespace")+"/"+q.Get("key"))
	}
	return out
}

func search(t *testing.T, s *site, token string, q url.Values) (int, string) {
	t.Helper()
	c, _ := signedIn(t, s, token)
	q.Set("search", "1")
	resp, page := fetch(t, c, s.url+"/ui/keys?"+q.Encode())
	return resp.StatusCode, page
}

func sameSet(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] != 1 {
			return false
		}
	}
	return true
}

func TestSearchKeyWithoutNamespace(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-0042", "n8n exec 4711", "timeout")
	s.unknownKey("crm", "bk-0042", "n8n exec 9", "the same key in another namespace")
	s.completedKey("invoices", "bk-0043")
	s.unknownKey("crm", "zz-0042", "n8n exec 5", "another prefix")
	for _, tc := range []struct {
		name  string
		token string
		q     url.Values
		want  []string
	}{
		{"a prefix finds keys in every namespace", actToken, url.Values{"key_prefix": {"bk-00"}},
			[]string{"bookings/bk-0042", "crm/bk-0042", "invoices/bk-0043"}},
		{"an exact key finds it in two namespaces", actToken, url.Values{"key_prefix": {"bk-0042"}, "match": {"exact"}},
			[]string{"bookings/bk-0042", "crm/bk-0042"}},
		{"the old link's key and match", actToken, url.Values{"key": {"bk-0042"}, "match": {"exact"}},
			[]string{"bookings/bk-0042", "crm/bk-0042"}},
		{"the old link's key as a prefix", actToken, url.Values{"key": {"bk-"}},
			[]string{"bookings/bk-0042", "crm/bk-0042", "invoices/bk-0043"}},
		{"with a state", actToken, url.Values{"key_prefix": {"bk-"}, "state": {"completed"}},
			[]string{"invoices/bk-0043"}},
		{"a namespace narrows it", actToken, url.Values{"key_prefix": {"bk-"}, "namespace": {"crm"}},
			[]string{"crm/bk-0042"}},
		{"text is a part of the key, any case", actToken, url.Values{"text": {"K-004"}},
			[]string{"bookings/bk-0042", "crm/bk-0042", "invoices/bk-0043"}},
		{"a person limited to namespaces sees only theirs", limitedToken, url.Values{"key_prefix": {"bk-0042"}, "match": {"exact"}},
			[]string{"bookings/bk-0042"}},
		{"a limited person's prefix", limitedToken, url.Values{"key_prefix": {"bk-"}},
			[]string{"bookings/bk-0042"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, page := search(t, s, tc.token, tc.q)
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200:\n%.2000s", status, page)
			}
			if got := results(t, page); !sameSet(got, tc.want...) {
				t.Fatalf("found %v, want %v", got, tc.want)
			}
			if want := strings.Count(strings.Join(tc.want, " "), "/"); !strings.Contains(page, `id="page-count"`) ||
				!regexp.MustCompile(`id="page-count"[^>]*>\s*`+strconv.Itoa(want)+` key`).MatchString(page) {
				t.Errorf("the page does not say it shows %d keys", want)
			}
		})
	}
}

func TestSearchHolderByPartFindsCompletedKeys(t *testing.T) {
	s := newSite(t)
	s.completedBy("crm", "lead-1", "n8n LeadCrm00000001 exec 48016")
	s.unknownKey("crm", "lead-2", "n8n LeadCrm00000001 exec 48017", "timeout")
	s.completedBy("bookings", "bk-1", "n8n Bookings exec 48016")
	s.completedBy("crm", "lead-3", "n8n OtherFlow exec 1")
	for _, tc := range []struct {
		name string
		q    url.Values
		want []string
	}{
		{"a part of the workflow, another case", url.Values{"holder": {"leadcrm"}},
			[]string{"crm/lead-1", "crm/lead-2"}},
		{"an execution number in two namespaces", url.Values{"holder": {"exec 48016"}},
			[]string{"crm/lead-1", "bookings/bk-1"}},
		{"completed only", url.Values{"holder": {"LEADCRM"}, "state": {"completed"}},
			[]string{"crm/lead-1"}},
		{"state any is every state", url.Values{"holder": {"leadcrm"}, "state": {"any"}},
			[]string{"crm/lead-1", "crm/lead-2"}},
		{"the old link's owner is the holder", url.Values{"owner": {"n8n LeadCrm00000001 exec 48016"}},
			[]string{"crm/lead-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, page := search(t, s, actToken, tc.q)
			if status != http.StatusOK {
				t.Fatalf("status %d:\n%.2000s", status, page)
			}
			if got := results(t, page); !sameSet(got, tc.want...) {
				t.Fatalf("found %v, want %v", got, tc.want)
			}
		})
	}
	// One word on this page for the n8n execution: holder.
	_, page := search(t, s, actToken, url.Values{"holder": {"leadcrm"}})
	if !strings.Contains(page, ">Holder<") {
		t.Error("the page does not name the holder")
	}
	// "Owner" is the person who hears about the namespace (its own
	// column), never the n8n execution.
	page = regexp.MustCompile(`(?s)<th scope="col">Owner</th>|<td class="owner">.*?</td>`).ReplaceAllString(page, "")
	if regexp.MustCompile(`(?i)>\s*owner\b|\bowner\s*<`).MatchString(page) || strings.Contains(page, "The owner") {
		t.Error(`the page still says "owner" for the n8n execution`)
	}
}

func TestSearchTimeRange(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := newClockSite(t, t0)
	s.completedBy("crm", "at-0900", "n8n exec 1")
	s.set(t0.Add(2 * time.Hour))
	s.completedBy("crm", "at-1100", "n8n exec 2")
	s.unknownKey("bookings", "at-1100b", "n8n exec 3", "timeout")
	s.set(t0.Add(5 * time.Hour))
	s.completedBy("crm", "at-1400", "n8n exec 4")
	for _, tc := range []struct {
		name string
		q    url.Values
		want []string
	}{
		{"RFC 3339 (a link)", url.Values{"from": {"2026-11-30T10:00:00Z"}, "to": {"2026-11-30T12:00:00Z"}},
			[]string{"crm/at-1100", "bookings/at-1100b"}},
		{"datetime-local without a zone is UTC", url.Values{"from": {"2026-11-30T10:00"}, "to": {"2026-11-30T12:00"}},
			[]string{"crm/at-1100", "bookings/at-1100b"}},
		{"in the reader's zone (Berlin, UTC+1)", url.Values{"from": {"2026-11-30T11:00"}, "to": {"2026-11-30T13:00"}, "tz": {"Europe/Berlin"}},
			[]string{"crm/at-1100", "bookings/at-1100b"}},
		{"in the reader's offset (minutes east of UTC)", url.Values{"from": {"2026-11-30T05:00"}, "to": {"2026-11-30T07:00"}, "tz": {"-300"}},
			[]string{"crm/at-1100", "bookings/at-1100b"}},
		{"from alone", url.Values{"from": {"2026-11-30T13:00"}}, []string{"crm/at-1400"}},
		{"to alone, with a prefix", url.Values{"to": {"2026-11-30T10:00"}, "key_prefix": {"at-"}}, []string{"crm/at-0900"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, page := search(t, s.site, actToken, tc.q)
			if status != http.StatusOK {
				t.Fatalf("status %d:\n%.2000s", status, page)
			}
			if got := results(t, page); !sameSet(got, tc.want...) {
				t.Fatalf("found %v, want %v", got, tc.want)
			}
		})
	}
	// A link's RFC 3339 time is shown in the form in the zone it is read in,
	// and that zone is kept for the next submit.
	_, page := search(t, s.site, actToken, url.Values{"from": {"2026-11-30T10:00:00Z"}, "tz": {"Europe/Berlin"}})
	if from, _ := inputValue(page, "from"); from != "2026-11-30T11:00" || !hasValue(page, "tz", "Europe/Berlin") {
		t.Errorf("the time is not shown in the reader's zone:\n%.3000s", page)
	}
	_, page = search(t, s.site, actToken, url.Values{"from": {"2026-11-30T10:00:00Z"}})
	if from, _ := inputValue(page, "from"); from != "2026-11-30T10:00" || !hasValue(page, "tz", "UTC") {
		t.Errorf("a link's time without a zone is not shown and kept as UTC")
	}
}

// inputValue is the value attribute of the input named name.
func inputValue(page, name string) (string, bool) {
	re := regexp.MustCompile(`<input[^>]*\bname="` + regexp.QuoteMeta(name) + `"[^>]*>`)
	tag := re.FindString(page)
	if tag == "" {
		return "", false
	}
	m := regexp.MustCompile(`\bvalue="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return "", true
	}
	return html.UnescapeString(m[1]), true
}

func hasValue(page, name, want string) bool {
	got, ok := inputValue(page, name)
	return ok && got == want
}

func selected(page, name string) string {
	sel := regexp.MustCompile(`(?s)<select[^>]*\bname="` + regexp.QuoteMeta(name) + `"[^>]*>(.*?)</select>`).FindStringSubmatch(page)
	if sel == nil {
		return "<no select>"
	}
	m := regexp.MustCompile(`<option value="([^"]*)"[^>]*\bselected\b`).FindStringSubmatch(sel[1])
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

func TestSearchBadInputIsShownOnThePageWithTheInputKept(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-0042", "n8n exec 4711", "timeout")
	typed := url.Values{
		"namespace": {"bookings"}, "key_prefix": {"bk-00"}, "text": {"42"}, "holder": {"exec 4711"},
		"destination": {"hubspot"}, "reason": {"outcome_unknown"}, "from": {"2026-11-30T10:00"}, "to": {"2026-12-01T10:00"},
		"state": {"unknown"},
	}
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name   string
		change url.Values
		status int
		field  string // the input marked as wrong
		says   string
	}{
		{"a time that is not one", url.Values{"from": {"2026-13-45T99:00"}}, 400, "from", "from"},
		{"an end before the start", url.Values{"to": {"2026-11-29T10:00"}}, 400, "to", "end of the time range"},
		{"a state that does not exist", url.Values{"state": {"lost"}}, 400, "state", "state"},
		{"an over-long holder", url.Values{"holder": {long}}, 400, "holder", "holder"},
		{"an over-long key", url.Values{"key_prefix": {long}}, 400, "key_prefix", "key_prefix"},
		{"a namespace that cannot be one", url.Values{"namespace": {"Bad NS!"}}, 400, "namespace", "namespace"},
		{"a namespace this person may not use", url.Values{"namespace": {"crm"}}, 403, "namespace", "crm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := url.Values{}
			for k, v := range typed {
				q[k] = v
			}
			for k, v := range tc.change {
				q[k] = v
			}
			status, page := search(t, s, limitedToken, q)
			if status != tc.status {
				t.Fatalf("status %d, want %d:\n%.2000s", status, tc.status, page)
			}
			if !strings.Contains(page, `id="search-form"`) {
				t.Fatalf("the answer is not the search page (the input is lost):\n%.2000s", page)
			}
			prob := regexp.MustCompile(`(?s)id="search-problem"[^>]*>(.*?)</div>`).FindStringSubmatch(page)
			if prob == nil || !strings.Contains(html.UnescapeString(prob[1]), tc.says) {
				t.Fatalf("the problem is not shown on the page (want it to mention %q)", tc.says)
			}
			for name, v := range q {
				if name == "state" {
					if got := selected(page, "state"); got != v[0] && !(tc.field == "state" && strings.Contains(page, v[0])) {
						t.Errorf("state: the form shows %q, typed %q", got, v[0])
					}
					continue
				}
				if got, ok := inputValue(page, name); !ok || got != v[0] {
					t.Errorf("%s: the form shows %q, typed %q", name, got, v[0])
				}
			}
			if !regexp.MustCompile(`<(input|select)[^>]*name="` + tc.field + `"[^>]*aria-invalid="true"`).MatchString(page) {
				t.Errorf("the field %s is not marked as wrong", tc.field)
			}
			if len(results(t, page)) != 0 {
				t.Error("a refused search shows results")
			}
		})
	}
}

func TestSearchPagesThroughEveryMatch(t *testing.T) {
	s := newSite(t)
	want := map[string]bool{}
	for i := range 130 {
		ns := []string{"bookings", "crm", "invoices"}[i%3]
		key := "pg-" + strconv.Itoa(1000+i)
		s.completedBy(ns, key, "n8n exec 1")
		want[ns+"/"+key] = true
	}
	s.completedKey("crm", "other-1")
	c, _ := signedIn(t, s, readToken)
	next := s.url + "/ui/keys?search=1&key_prefix=pg-"
	seen := map[string]bool{}
	pages := 0
	for next != "" {
		pages++
		if pages > 20 {
			t.Fatal("the pages do not end")
		}
		resp, page := fetch(t, c, next)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d: %d", pages, resp.StatusCode)
		}
		for _, r := range results(t, page) {
			if seen[r] {
				t.Fatalf("%s is listed twice", r)
			}
			seen[r] = true
		}
		next = ""
		if m := regexp.MustCompile(`<a href="([^"]+)" rel="next"`).FindStringSubmatch(page); m != nil {
			next = s.url + html.UnescapeString(m[1])
		}
	}
	if len(seen) != len(want) || pages < 3 {
		t.Fatalf("found %d keys in %d pages, want %d in 3 or more", len(seen), pages, len(want))
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("%s is never listed", k)
		}
	}
}

func TestSearchLinksToDecideAllMatching(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	q := url.Values{"key_prefix": {"bk-"}, "state": {"unknown"}, "holder": {"exec"}}
	_, page := search(t, s, actToken, q)
	m := regexp.MustCompile(`<a[^>]*id="bulk-link"[^>]*href="([^"]+)"|<a[^>]*href="([^"]+)"[^>]*id="bulk-link"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no link to decide all matching keys")
	}
	link, err := url.Parse(html.UnescapeString(m[1] + m[2]))
	if err != nil || link.Path != "/ui/bulk" {
		t.Fatalf("the link goes to %q", m[1]+m[2])
	}
	f, err := keystore.FilterFromQuery(link.Query(), time.UTC)
	if err != nil || f.KeyPrefix != "bk-" || f.Holder != "exec" || len(f.States) != 1 || f.States[0] != keystore.StateUnknown {
		t.Fatalf("the link's filter %+v (%v) is not the search's", f, err)
	}
	_, page = search(t, s, readToken, q)
	if strings.Contains(page, "bulk-link") {
		t.Error("a read role is offered to decide all matching keys")
	}
	_, page = search(t, s, actToken, url.Values{"key_prefix": {"bk-1"}, "match": {"exact"}})
	if strings.Contains(page, "bulk-link") {
		t.Error("an exact key (one per namespace) is offered a bulk decision whose filter would be a prefix")
	}
}

// Links that exist (the overview, bookmarks) keep working.
func TestSearchOldLinksStillWork(t *testing.T) {
	s := newSite(t)
	s.unknownKey("crm", "evt-1", "n8n exec 7", "timeout")
	c, _ := signedIn(t, s, actToken)
	_, overview := fetch(t, c, s.url+"/ui")
	links := regexp.MustCompile(`href="(/ui/keys\?[^"]+)"`).FindAllStringSubmatch(overview, -1)
	for _, path := range append([]string{
		"/ui/keys?search=1&namespace=crm&key=evt-&match=prefix&state=unknown&owner=n8n+exec+7",
		"/ui/keys?search=1&namespace=crm&key=evt-1&match=exact",
		"/ui/keys?search=1&state=unknown",
		"/ui/keys?search=1&owner=n8n+exec+7",
		"/ui/keys?search=1&cursor=not-a-cursor",
		"/ui/keys?search=1&match=exact",
	}, func() (out []string) {
		for _, l := range links {
			out = append(out, html.UnescapeString(l[1]))
		}
		return out
	}()...) {
		resp, page := fetch(t, c, s.url+path)
		if resp.StatusCode >= 500 || !strings.Contains(page, `id="search-form"`) {
			t.Errorf("%s: %d, not the search page", path, resp.StatusCode)
		}
		if resp.StatusCode == http.StatusOK && path != "/ui/keys?search=1&match=exact" && strings.Contains(path, "crm") &&
			!sameSet(results(t, page), "crm/evt-1") {
			t.Errorf("%s found %v", path, results(t, page))
		}
	}
}

// A search opened after the session ended comes back after the sign-in.
func TestSearchSurvivesTheSignIn(t *testing.T) {
	s := newSite(t)
	s.unknownKey("crm", "evt-1", "n8n exec 7", "timeout")
	c := client(t)
	path := "/ui/keys?search=1&key_prefix=evt-&holder=exec"
	resp, _ := fetch(t, c, s.url+path)
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil || loc.Path != "/ui/signin" {
		t.Fatalf("signed out: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp = postForm(t, c, s.url+"/ui/signin", url.Values{"token": {actToken}, "resume": {loc.Query().Get("resume")}})
	resp.Body.Close()
	if got := resp.Header.Get("Location"); got != path {
		t.Fatalf("after the sign-in the person lands on %q, want the search %q", got, path)
	}
	_, page := fetch(t, c, s.url+path)
	if !sameSet(results(t, page), "crm/evt-1") {
		t.Errorf("found %v", results(t, page))
	}
}

// An exact key the store refuses (it looks like an e-mail address) is
// said on the page, next to the key as typed.
func TestSearchExactKeyTheStoreRefuses(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	status, page := search(t, s, actToken, url.Values{"key_prefix": {"ana@example.com"}, "match": {"exact"}, "holder": {"exec"}})
	if status != http.StatusBadRequest || !strings.Contains(page, `id="search-problem"`) || !strings.Contains(page, "e-mail") {
		t.Fatalf("status %d, want 400 with the store's reason on the page:\n%.2000s", status, page)
	}
	if !hasValue(page, "key_prefix", "ana@example.com") || !hasValue(page, "holder", "exec") || selected(page, "match") != "exact" {
		t.Error("the input is not kept")
	}
	if !regexp.MustCompile(`<input[^>]*name="key_prefix"[^>]*aria-invalid="true"`).MatchString(page) {
		t.Error("the key is not marked as the field at fault")
	}
}
