package console_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	slackapi "github.com/n8n-guard/n8n-guard/slack"
)

// The console's content security policy, byte for byte as it was before
// console.js: the script is a file of the console's own, nothing inline.
const consoleCSP = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// longKey is a key as long as real ones get (an n8n expression joining
// ids), with no space to break at: 120 characters.
func longKey(prefix string, i int) string {
	k := fmt.Sprintf("%s-%03d-", prefix, i)
	return k + strings.Repeat("0123456789abcdef", 8)[:120-len(k)]
}

const longHolder = "n8n execution 48016 of workflow LeadCrmSynchronisationWithHubSpotAndSalesforceNightlyRun (queue worker 7)"
const longDest = "hubspot-eu-west-production-contacts-endpoint-v3"

// newBusySite is a console with something on every list, all of it long:
// keys of 120 characters, long holders and destination names, waiting
// keys, an open breaker with parked (and lost) keys, approvals, decisions
// in the audit list and a dead notification.
func newBusySite(t *testing.T) *site {
	t.Helper()
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"invoices": {Approval: keystore.ApprovalPolicy{Required: true}}}}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: parkingDestinations(pol, longDest)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	notes := deadNotification(t, store)
	s, stop, err := serve(store, notes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t
	for i := range 4 {
		s.unknownKey("crm-contacts", longKey("lead", i), longHolder, "timeout after 30s waiting for the CRM's answer")
	}
	for i := range 2 {
		s.parkedKey("crm-contacts", longKey("park", i), longDest, "http://n8n.local/webhook-waiting/"+fmt.Sprint(i))
	}
	s.lostKey("crm-contacts", longKey("lost", 0), longDest, "http://n8n.local/webhook-waiting/lost")
	for i := range 2 {
		res, err := store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "invoices", Key: longKey("inv", i), Owner: longHolder,
			RequestedBy: "finance-approvals-team-member-with-a-long-name@example.com", ResumeURL: "http://n8n.local/webhook-waiting/inv" + fmt.Sprint(i), Fingerprint: "invoice " + fmt.Sprint(i)})
		if err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve an invoice: %+v %v", res, err)
		}
	}
	if _, err := store.Resolve(s.ctx, keystore.ResolveRequest{Namespace: "crm-contacts", Key: longKey("lead", 3), Resolution: keystore.StateFailed,
		By: "maximiliane.oberhuber-vandersteen@example.com (console, OIDC)", Note: "the CRM has no such contact"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// deadNotification runs the outbox against a Slack that refuses the
// channel, as Slack does, until one notification (of a long workflow
// name) is dead.
func deadNotification(t *testing.T, store *bolt.Store) *notify.Service {
	t.Helper()
	slack := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":false,"error":"channel_not_found"}`))
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go slack.Serve(ln)
	t.Cleanup(func() { slack.Close() })
	outbox, err := notifybolt.New(store.DB)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := notify.New(notify.Config{DefaultChannel: "C0GONE", DefaultOwner: "U0ONCALL"},
		notify.Options{Outbox: outbox, PollInterval: 10 * time.Millisecond,
			Slack: slackapi.New(slackapi.Options{Token: "xoxb-test", APIURL: "http://" + ln.Addr().String() + "/api/"})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { notes.Run(ctx); close(done) }()
	t.Cleanup(sync.OnceFunc(func() { cancel(); <-done }))
	if _, err := notes.Intake(ctx, []byte(`{"execution":{"id":"48016","error":{"message":"HTTP 500 from https://api.hubapi.com/crm/v3/objects/contacts/batch/upsert?idProperty=email_and_company_identifier"},"lastNodeExecuted":"Upsert contacts in HubSpot"},"workflow":{"id":"w1","name":"LeadCrmSynchronisationWithHubSpotAndSalesforceNightlyRun"}}`)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the notification to go dead", func() bool {
		page, err := notes.List(ctx, notify.ListQuery{Status: notify.StatusDead})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Items) == 1
	})
	return notes
}

// The list pages a person on call opens from a phone.
var listPages = []struct{ name, path, ready string }{
	{"overview", "/ui", "#waiting"},
	{"search", "/ui/keys?search=1&state=unknown", "#results"},
	{"breakers", "/ui/breakers", "#breakers"},
	{"parked", "/ui/parked", "#parked-list"},
	{"approvals", "/ui/approvals", "#approvals"},
	{"audit", "/ui/audit", "#audit"},
	{"notifications", "/ui/notifications", "#notifications"},
	{"destination", "/ui/destination?name=" + longDest, "#dest-parked-h"},
}

// offScreen lists what a phone would have to scroll sideways for: the page
// wider than the screen, an action (link or button) not wholly on it, a
// list's key, state, age or action cell hidden.
const offScreen = `(() => {
	const w = window.innerWidth, out = [];
	const se = document.scrollingElement;
	if (se.scrollWidth > w) out.push('the page is ' + se.scrollWidth + ' px wide on a ' + w + ' px screen');
	for (const el of document.querySelectorAll('main a, main button')) {
		const r = el.getBoundingClientRect();
		if (r.width === 0 && r.height === 0) continue; // not drawn: a closed <details>
		if (r.left < -0.5 || r.right > w + 0.5) out.push((el.textContent.trim() || el.getAttribute('aria-label')).slice(0, 40) + ' spans ' + Math.round(r.left) + '..' + Math.round(r.right));
	}
	for (const td of document.querySelectorAll('table.list td.key, table.list td.state, table.list td.age, table.list td.act')) {
		const r = td.getBoundingClientRect();
		if (td.textContent.trim() === '') continue;
		if (r.width === 0 || r.left < -0.5 || r.right > w + 0.5) out.push('a ' + td.className + ' cell spans ' + Math.round(r.left) + '..' + Math.round(r.right));
	}
	return out;
})()`

// At 390 px (a phone) every list shows its keys, states, ages and
// actions without sideways scrolling, with keys of 120 characters and
// long names. The same checks fail with the stylesheet before the phone
// layout (the key column and the actions sat in a scrolling box).
func TestLookPhoneListsNeedNoSidewaysScroll(t *testing.T) {
	s := newBusySite(t)
	b := newBrowser(t, s, 800, 844)
	b.run("390 px", chromedp.EmulateViewport(390, 844))
	b.signIn(actToken)
	for _, dark := range []bool{false, true} {
		scheme := "light"
		if dark {
			scheme = "dark"
			b.run("dark", darkScheme(true))
		}
		for _, p := range listPages {
			b.run("open "+p.name, chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			b.shot(p.name + "-390-" + scheme)
			if bad := get(b, "measure "+p.name, chromedp.Evaluate[[]string](offScreen)); len(bad) > 0 {
				t.Errorf("%s at 390 px (%s): %s", p.name, scheme, strings.Join(bad, "; "))
			}
			if n := get(b, "wide cells", chromedp.Evaluate[int](`[...document.querySelectorAll('table.list td.wide')].filter(td => td.getClientRects().length > 0).length`)); n > 0 {
				t.Errorf("%s at 390 px: %d cells of columns marked wide are shown", p.name, n)
			}
		}
	}
}

// The same pages on a desktop, light and dark (the system's setting,
// emulated), for the eye (the screenshots), the same checks at 1280 px and
// the contrast of their text.
func TestLookDesktopListsLightAndDark(t *testing.T) {
	s := newBusySite(t)
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	for _, dark := range []bool{false, true} {
		scheme := "light"
		if dark {
			scheme = "dark"
			b.run("dark", darkScheme(true))
		}
		for _, p := range listPages {
			b.run("open "+p.name, chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			b.shot(p.name + "-1280-" + scheme)
			checkContrast(t, b, p.name, dark)
			if bad := get(b, "measure "+p.name, chromedp.Evaluate[[]string](offScreen)); len(bad) > 0 {
				t.Errorf("%s at 1280 px (%s): %s", p.name, scheme, strings.Join(bad, "; "))
			}
		}
	}
}

// The overview and the lists ask console.js to fetch them again
// (data-refresh, Config.Refresh, 15 s by default); a console told never to
// refresh draws none.
func TestListPagesAskToBeRefreshed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every time.Duration
		want  string
	}{
		{"by default every 15 s", 0, `data-refresh="15"`},
		{"every second", time.Second, `data-refresh="1"`},
		{"never", -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRefreshingSite(t, tc.every)
			s.parkedKey("crm", "p-1", longDest, "http://n8n.local/webhook-waiting/1")
			c, _ := signedIn(t, s, actToken)
			for _, p := range listPages {
				_, page := fetch(t, c, s.url+p.path)
				main := page[strings.Index(page, "<main"):]
				main = main[:strings.Index(main, ">")]
				if tc.want == "" && strings.Contains(main, "data-refresh") || tc.want != "" && !strings.Contains(main, tc.want) {
					t.Errorf("%s: %s, want %q", p.name, main, tc.want)
				}
			}
		})
	}
}

func darkScheme(on bool) chromedp.Action[chromedp.Void] {
	value := "light"
	if on {
		value = "dark"
	}
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: value}}})
		return err
	})
}

// contrast measures, for each kind of text, the worst ratio between its
// colour and the background it is drawn on (WCAG's relative luminance).
const contrast = `(() => {
	const rgb = s => { const m = s.match(/rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?/); return m ? [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]] : null };
	const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4) }; return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]) };
	const bg = el => { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el).backgroundColor); if (c && c[3] > 0.5) return c } return [255, 255, 255, 1] };
	const ratio = el => { const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg(el)); return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) };
	const worst = {};
	for (const [kind, sel] of Object.entries({body: 'main p, main td, main h1, main h2, main dd', muted: 'main .help, main dt, footer', link: 'main a:not(.button)', state: 'main span.state', button: 'main button, main a.button'})) {
		for (const el of document.querySelectorAll(sel)) {
			if (!el.textContent.trim() || el.getClientRects().length === 0) continue;
			const r = ratio(el);
			if (worst[kind] === undefined || r < worst[kind]) worst[kind] = Math.round(r * 100) / 100;
		}
	}
	worst.background = Math.round(lum(bg(document.body)) * 1000) / 1000;
	return worst;
})()`

// checkContrast: the page follows the system's dark setting, and every
// kind of text keeps a contrast of at least 4.5:1 in both schemes.
func checkContrast(t *testing.T, b *browser, name string, dark bool) {
	t.Helper()
	got := get(b, "contrast "+name, chromedp.Evaluate[map[string]float64](contrast))
	t.Logf("%s (dark %v): worst contrast %v", name, dark, got)
	if bgLum := got["background"]; dark != (bgLum < 0.05) {
		t.Errorf("%s (dark %v): the page's background has luminance %v", name, dark, bgLum)
	}
	for kind, r := range got {
		if kind != "background" && r < 4.5 {
			t.Errorf("%s (dark %v): %s text has a contrast of %v:1, want at least 4.5:1", name, dark, kind, r)
		}
	}
}

// The overview and the lists refresh by themselves: a key that goes
// unknown in the store shows up within the interval, without a navigation
// (a marker set on window survives, one navigation entry), without a
// CSP violation and with the CSP header as before.
func TestLookSelfRefresh(t *testing.T) {
	s := newRefreshingSite(t, time.Second)
	s.unknownKey("bookings", "bk-old", "n8n exec 1", "timeout")
	c, _ := signedIn(t, s, actToken)
	resp, _ := fetch(t, c, s.url+"/ui")
	if got := resp.Header.Get("Content-Security-Policy"); got != consoleCSP {
		t.Fatalf("CSP %q, want %q", got, consoleCSP)
	}
	b := newBrowser(t, s, 1280, 900)
	b.run("watch for CSP violations", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__violations = []; document.addEventListener('securitypolicyviolation', e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));`})
		return err
	}))
	b.signIn(actToken)
	b.run("mark the page", js(`window.__samePage = 'yes'; window.__refreshed = 0;
		document.addEventListener('console:refreshed', () => window.__refreshed++)`))
	interval := get(b, "interval", chromedp.Evaluate[string](`document.querySelector('main').dataset.refresh || ''`))
	if interval == "" {
		t.Fatal("the overview does not ask to be refreshed (<main data-refresh>)")
	}
	s.unknownKey("bookings", "bk-new-while-watching", "n8n exec 2", "timeout")
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#waiting').textContent.includes('bk-new-while-watching')`, chromedp.WithPollingInterval(250*time.Millisecond))); err != nil {
		b.shot("not-refreshed")
		t.Fatalf("the new waiting key did not appear without a reload: %v", err)
	}
	b.shot("refreshed")
	state := get(b, "after", chromedp.Evaluate[map[string]any](`({same: window.__samePage, navigations: performance.getEntriesByType('navigation').length,
		refreshed: window.__refreshed, violations: window.__violations, count: document.querySelector('#waiting-h .count').textContent})`))
	if state["same"] != "yes" || state["navigations"] != float64(1) {
		t.Errorf("the page was loaded again: %v", state)
	}
	if state["refreshed"] == float64(0) || state["count"] != "2" {
		t.Errorf("refresh: %v", state)
	}
	if v, _ := state["violations"].([]any); len(v) > 0 {
		t.Errorf("CSP violations: %v", v)
	}
	resp, _ = fetch(t, c, s.url+"/ui")
	if got := resp.Header.Get("Content-Security-Policy"); got != consoleCSP {
		t.Errorf("CSP after: %q", got)
	}
}

// A page with a form the person is filling is never replaced: the
// destination page refreshes, but not while its hold reason holds text,
// even text put there without an input event (autofill).
func TestLookRefreshWaitsForTheFormBeingFilled(t *testing.T) {
	s := newRefreshingSite(t, time.Second)
	s.parkedKey("crm", "p-1", "hubspot", "http://n8n.local/webhook-waiting/1")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.run("open hubspot", chromedp.Navigate(s.url+"/ui/destination?name=hubspot"), chromedp.WaitVisible(chromedp.CSS(`#hold-reason`)),
		// Set as autofill or a script would: no input event at all.
		js(`document.getElementById('hold-reason').value = 'CRM upgrade, ticket OPS-'`),
		js(`window.__refreshed = 0; window.__waited = 0; document.activeElement.blur();
			document.addEventListener('console:refreshed', () => window.__refreshed++);
			document.addEventListener('console:refresh-waited', () => window.__waited++)`))
	s.parkedKey("crm", "p-2", "hubspot", "http://n8n.local/webhook-waiting/2")
	// The page says when it put a refresh off: two of them, two intervals.
	get(b, "two refreshes put off", chromedp.Poll[bool](`window.__waited >= 2 || window.__refreshed > 0`, chromedp.WithPollingInterval(100*time.Millisecond)))
	b.shot("still-typing")
	got := get(b, "after", chromedp.Evaluate[map[string]any](`({reason: document.querySelector('#hold-reason').value,
		parked: document.querySelector('#dest-parked').textContent, refreshed: window.__refreshed})`))
	if got["reason"] != "CRM upgrade, ticket OPS-" || got["parked"] != "1" || got["refreshed"] != float64(0) {
		t.Errorf("the page was refreshed under a half-typed reason: %v", got)
	}
}

// Times read in the reader's time zone, with UTC in the title; the
// footer says which zone.
func TestLookTimesInTheReadersZone(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	b := newBrowser(t, s, 1280, 900)
	b.run("New York", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "America/New_York"})
		return err
	}))
	b.signIn(actToken)
	b.shot("new-york")
	got := get(b, "times", chromedp.Evaluate[map[string]string](`(() => { const t = document.querySelector('footer time');
		return {datetime: t.getAttribute('datetime'), text: t.textContent, title: t.title, note: document.getElementById('tz-note').textContent} })()`))
	at, err := time.Parse(time.RFC3339, got["datetime"])
	if err != nil {
		t.Fatalf("datetime %q: %v", got["datetime"], err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	if want := at.In(ny).Format("2006-01-02 15:04:05 MST"); got["text"] != want {
		t.Errorf("time reads %q, want New York's %q", got["text"], want)
	}
	if want := at.UTC().Format("2006-01-02 15:04:05 UTC"); got["title"] != want {
		t.Errorf("title %q, want the UTC time %q", got["title"], want)
	}
	if !strings.Contains(got["note"], "America/New_York") {
		t.Errorf("the footer says %q", got["note"])
	}
	hour := get(b, "chart hour", chromedp.Evaluate[map[string]string](`(() => { const t = document.querySelector('#activity-chart [data-hour]');
		return {at: t.getAttribute('data-hour'), text: t.textContent} })()`))
	if at, err := time.Parse(time.RFC3339, hour["at"]); err != nil || hour["text"] != at.In(ny).Format("15:04") {
		t.Errorf("the chart's first hour reads %q for %s (%v), want New York's hour", hour["text"], hour["at"], err)
	}
	// A form with a hidden tz field sends the reader's zone (filled on
	// load, after each refresh and on submit, so a form added later has it).
	zone := get(b, "tz field", chromedp.Evaluate[string](`(() => { const f = document.createElement('form'); f.action = '/ui/keys';
		const i = document.createElement('input'); i.type = 'hidden'; i.name = 'tz'; f.appendChild(i);
		document.querySelector('main').appendChild(f); let sent = '';
		window.addEventListener('submit', e => { sent = e.target.elements.tz.value; e.preventDefault() }, {once: true});
		f.requestSubmit(); return sent })()`))
	if zone != "America/New_York" {
		t.Errorf("the form's tz field sent %q", zone)
	}
}
