package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/keystore"
)

const n8nBase = "http://n8n.local:5678"

// The person on call during an outage: the breaker list shows how many
// events are parked and where the catch-up stands; the parked list marks
// the one n8n lost and the overdue one, each with its next step; the lost
// key's page links to n8n's executions and offers the decision.
func TestBrowserParkedKeys(t *testing.T) {
	s := newSite(t)
	s.parkedKey("crm", "evt-1", "hubspot", n8nBase+"/webhook-waiting/81")
	s.parkedKey("crm", "evt-2", "hubspot", n8nBase+"/webhook-waiting/82")
	s.lostKey("crm", "evt-3", "hubspot", n8nBase+"/webhook-waiting/83")
	s.parkedKey("late", "evt-9", "hubspot", n8nBase+"/webhook-waiting/89")
	s.parkedKey("crm", "evt-s", "salesforce", n8nBase+"/webhook-waiting/90")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.shot("overview")
	if got := b.text(`li[data-destination=hubspot]`); !strings.Contains(got, "3 parked") || !strings.Contains(got, "probe") {
		t.Errorf("overview's hubspot line %q: want 3 parked (the lost one is not waiting) and when it probes", got)
	}

	b.run("breakers", chromedp.Navigate(s.url+"/ui/breakers"), chromedp.WaitVisible(chromedp.CSS(`#breakers`)))
	b.shot("breakers")
	if got := b.text(`tr[data-destination=hubspot] td.parked`); got != "3" {
		t.Errorf("hubspot's parked count %q, want 3", got)
	}
	if got := b.text(`tr[data-destination=hubspot] td.catchup`); !strings.Contains(got, "waiting for the destination") {
		t.Errorf("hubspot's catch-up %q", got)
	}

	b.run("parked of hubspot",
		chromedp.Navigate(s.url+"/ui/parked"),
		chromedp.WaitVisible(chromedp.CSS(`#p-destination`)),
		chromedp.SendKeys(chromedp.CSS(`#p-destination`), "hubspot"),
		chromedp.Submit(chromedp.CSS(`#p-destination`)),
		chromedp.WaitVisible(chromedp.CSS(`#parked-list`)))
	b.shot("parked-hubspot")
	rows := get(b, "rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#parked-list tbody tr')].map(r => r.dataset.key + ':' + r.className)`))
	if strings.Join(rows, " ") != "evt-1:parked-waiting evt-2:parked-waiting evt-3:parked-lost evt-9:parked-overdue" {
		t.Errorf("parked rows %v: want the four of hubspot, evt-3 lost, evt-9 overdue", rows)
	}
	if got := b.text(`tr[data-key=evt-3] td:last-child`); !strings.Contains(got, "no longer holds the execution") || !strings.Contains(got, "decide") {
		t.Errorf("the lost key's next step %q", got)
	}
	if got := b.text(`tr[data-key=evt-9] td:last-child`); !strings.Contains(got, "parked_limit") {
		t.Errorf("the overdue key's next step %q", got)
	}
	if got := b.text(`#parked-attention`); got != "1 lost, 1 overdue on this page: see the next step of each." {
		t.Errorf("attention line %q", got)
	}
	b.run("filter by namespace",
		js(`document.getElementById('p-destination').value = ''`),
		chromedp.SetValue(chromedp.CSS(`#p-namespace`), "late"),
		chromedp.Submit(chromedp.CSS(`#p-namespace`)),
		chromedp.WaitVisible(chromedp.CSS(`#parked-list`)))
	rows = get(b, "rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#parked-list tbody tr')].map(r => r.dataset.key)`))
	if strings.Join(rows, " ") != "evt-9" {
		t.Errorf("namespace late lists %v", rows)
	}

	b.openKey("crm", "evt-3", `#parked`)
	b.shot("key-lost")
	if got := b.text(`#parked-status`); got != "lost" {
		t.Errorf("parked status %q, want lost", got)
	}
	href := get(b, "execution link", chromedp.Evaluate[string](`document.querySelector('#parked-execution a').href`))
	if href != n8nBase+"/home/executions" || b.text(`#parked-execution a`) != "execution 83" {
		t.Errorf("execution link %q (%q)", href, b.text(`#parked-execution a`))
	}
	if !b.exists(`#resolve-form`) {
		t.Error("a lost parked key offers no decision")
	}
	b.openKey("crm", "evt-1", `#parked`)
	if got := b.text(`#parked-status`); got != "waiting for the destination" || b.exists(`#resolve-form`) {
		t.Errorf("a waiting parked key: status %q, decision form shown %v", got, b.exists(`#resolve-form`))
	}
}

// Setting and ending a maintenance window from the console: a reason is
// required (refused with the problem shown, nothing changed), then the
// window shows who set it and why until a person ends it.
func TestBrowserMaintenanceWindow(t *testing.T) {
	s := newSite(t)
	s.completedKey("crm", "evt-0")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.run("destination page", chromedp.Navigate(s.url+"/ui/destination?name=hubspot"), chromedp.WaitVisible(chromedp.CSS(`#hold-form`)))
	b.shot("before")
	until := time.Now().UTC().Add(3 * time.Hour).Format("2006-01-02T15:04")

	// No reason: the browser would stop it; drop required as a script could.
	b.run("hold without a reason",
		js(`document.getElementById('hold-reason').removeAttribute('required')`),
		chromedp.SetValue(chromedp.CSS(`#hold-until`), until),
		js(`document.getElementById('hold-reason').value = '  '`),
		chromedp.Click(chromedp.CSS(`#hold-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#hold-problem`)))
	b.shot("hold-refused")
	if got := b.text(`#hold-problem`); !strings.Contains(got, "reason is required") {
		t.Errorf("problem shown %q", got)
	}
	if br := s.breaker("hubspot"); br.State != keystore.BreakerClosed || br.Maintenance != nil {
		t.Fatalf("a refused hold changed the breaker: %+v", br)
	}
	// An end in the past: refused by the store's rule. The first
	// problem is removed first, so the wait below waits for the answer's
	// page, not the one still shown.
	b.run("hold into the past",
		js(`document.getElementById('hold-problem').remove()`),
		chromedp.SetValue(chromedp.CSS(`#hold-until`), time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")),
		chromedp.SendKeys(chromedp.CSS(`#hold-reason`), "CRM upgrade"),
		chromedp.Click(chromedp.CSS(`#hold-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#hold-problem`)))
	if got := b.text(`#hold-problem`); !strings.Contains(got, "until must be in the future") {
		t.Errorf("problem shown %q", got)
	}
	if got := get(b, "reason kept", chromedp.Value(chromedp.CSS(`#hold-reason`))); strings.TrimSpace(got) != "CRM upgrade" {
		t.Errorf("the form lost the reason typed: %q", got)
	}
	if br := s.breaker("hubspot"); br.Maintenance != nil {
		t.Fatalf("a refused hold set a window: %+v", br)
	}

	b.run("hold",
		chromedp.SetValue(chromedp.CSS(`#hold-until`), until),
		chromedp.SetValue(chromedp.CSS(`#hold-reason`), "HubSpot upgrade, ticket OPS-12"),
		chromedp.Click(chromedp.CSS(`#hold-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#window`)))
	b.shot("held")
	if got := b.text(`#window-by`) + " / " + b.text(`#window-reason`); got != "console: on-call / HubSpot upgrade, ticket OPS-12" {
		t.Errorf("window shown as %q", got)
	}
	br := s.breaker("hubspot")
	if br.State != keystore.BreakerOpen || br.Maintenance == nil || br.Maintenance.Until.Format("2006-01-02T15:04") != until {
		t.Fatalf("stored breaker %+v", br)
	}
	// Events now park; the lists show the window.
	s.parkedKey("crm", "evt-1", "hubspot", n8nBase+"/webhook-waiting/81")
	b.run("breakers", chromedp.Navigate(s.url+"/ui/breakers"), chromedp.WaitVisible(chromedp.CSS(`#breakers`)))
	b.shot("breakers-held")
	if got := b.text(`tr[data-destination=hubspot] td.window`); !strings.Contains(got, "set by console: on-call") || !strings.Contains(got, "OPS-12") {
		t.Errorf("breaker list window %q", got)
	}
	if got := b.text(`tr[data-destination=hubspot] td.catchup`); !strings.Contains(got, "after the maintenance window") {
		t.Errorf("breaker list catch-up %q", got)
	}

	b.run("end without a reason",
		chromedp.Navigate(s.url+"/ui/destination?name=hubspot"),
		chromedp.WaitVisible(chromedp.CSS(`#end-form`)),
		js(`document.getElementById('end-reason').removeAttribute('required')`),
		chromedp.Click(chromedp.CSS(`#end-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#hold-problem`)))
	if got := b.text(`#hold-problem`); !strings.Contains(got, "reason is required") {
		t.Errorf("problem shown %q", got)
	}
	if br := s.breaker("hubspot"); br.Maintenance == nil {
		t.Fatal("a refused end ended the window")
	}
	b.run("end",
		chromedp.SendKeys(chromedp.CSS(`#end-reason`), "upgrade finished early"),
		chromedp.Click(chromedp.CSS(`#end-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#no-window`)))
	b.shot("ended")
	// Half open, no probe out yet: "probing" only once one is in flight.
	if got := b.text(`#dest-state`); got != "paused: the next write or parked event is the probe" {
		t.Errorf("state after the end %q, want the probe next (half_open, none out) in words", got)
	}
	if got := b.text(`#dest-catchup`); !strings.Contains(got, "the oldest is resumed next as the probe") || strings.Contains(got, "probing") {
		t.Errorf("catch-up after the end %q", got)
	}
}

// A maintenance window pauses a destination for every namespace: a token
// limited to namespaces may not set or end one (as on the API), is not
// offered the form, and changes nothing; a form without its CSRF token or
// with a malformed end changes nothing either.
func TestHoldRefusals(t *testing.T) {
	s := newSite(t)
	c, csrf := signedIn(t, s, limitedToken)
	_, page := fetch(t, c, s.url+"/ui/destination?name=hubspot")
	if strings.Contains(page, `id="hold-form"`) || !strings.Contains(page, "hold-read-only") {
		t.Fatal("a namespace-limited token is offered the window form")
	}
	resp := postForm(t, c, s.url+"/ui/destination/hold", url.Values{"csrf": {csrf}, "destination": {"hubspot"}, "until": {time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")}, "reason": {"x"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("hold with a limited token: %d, want 403", resp.StatusCode)
	}
	c, csrf = signedIn(t, s, actToken)
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		want   string
	}{
		{"no CSRF token", url.Values{"destination": {"hubspot"}, "until": {"2099-01-01T00:00"}, "reason": {"x"}}, http.StatusForbidden, "CSRF"},
		{"no end", url.Values{"csrf": {csrf}, "destination": {"hubspot"}, "until": {""}, "reason": {"x"}}, http.StatusBadRequest, "date and time"},
		{"end not a time", url.Values{"csrf": {csrf}, "destination": {"hubspot"}, "until": {"tomorrow"}, "reason": {"x"}}, http.StatusBadRequest, "date and time"},
		{"more than 30 days", url.Values{"csrf": {csrf}, "destination": {"hubspot"}, "until": {time.Now().UTC().Add(40 * 24 * time.Hour).Format("2006-01-02T15:04")}, "reason": {"x"}}, http.StatusBadRequest, "30 days"},
		{"bad destination", url.Values{"csrf": {csrf}, "destination": {"Hub Spot"}, "until": {"2099-01-01T00:00"}, "reason": {"x"}}, http.StatusBadRequest, "destination"},
	} {
		resp := postForm(t, c, s.url+"/ui/destination/hold", tc.form)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d, want %d with %q", tc.name, resp.StatusCode, tc.status, tc.want)
		}
	}
	if br := s.breaker("hubspot"); br.State != keystore.BreakerClosed || br.Maintenance != nil {
		t.Fatalf("a refused hold changed the breaker: %+v", br)
	}
	resp = postForm(t, c, s.url+"/ui/destination/end-hold", url.Values{"csrf": {csrf}, "destination": {"hubspot"}, "reason": {"nothing to end"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("end of a window on a destination without a breaker: %d, want 404", resp.StatusCode)
	}
}

func TestExecutionOfResumeURL(t *testing.T) {
	for _, tc := range []struct{ url, id, list string }{
		{"http://n8n.local:5678/webhook-waiting/81", "81", "http://n8n.local:5678/home/executions"},
		{"https://example.com/n8n/webhook-waiting/4711/suffix", "4711", "https://example.com/n8n/home/executions"},
		{"https://example.com/webhook/abc", "", ""},
		{"javascript:alert(1)//webhook-waiting/1", "", ""},
	} {
		id, list := console.ExecutionOf(tc.url)
		if id != tc.id || list != tc.list {
			t.Errorf("%s: %q %q, want %q %q", tc.url, id, list, tc.id, tc.list)
		}
	}
}

// At 360 px the parked list and the destination page need no sideways
// scrolling but the tables' own boxes, and every field has a label.
func TestBrowserParkingNarrowScreen(t *testing.T) {
	s := newSite(t)
	s.lostKey("crm", "evt-1", "hubspot", n8nBase+"/webhook-waiting/81")
	s.parkedKey("crm", "evt-2", "hubspot", n8nBase+"/webhook-waiting/82")
	b := newBrowser(t, s, 800, 740)
	b.run("360 px", chromedp.EmulateViewport(360, 740))
	b.signIn(actToken)
	for _, pg := range []struct{ name, path, sel string }{
		{"parked", "/ui/parked", `#parked-list`},
		{"destination", "/ui/destination?name=hubspot", `#hold-form`},
		{"key", "/ui/key?namespace=crm&key=evt-1", `#parked`},
	} {
		b.run(pg.name, chromedp.Navigate(s.url+pg.path), chromedp.WaitVisible(chromedp.CSS(pg.sel)))
		b.shot(pg.name + "-360")
		if get(b, "overflow", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`)) {
			t.Errorf("%s is wider than a 360 px screen", pg.name)
		}
		unlabelled := get(b, "labels", chromedp.Evaluate[[]string](`[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
			.filter(e => !(e.labels && e.labels.length)).map(e => e.name)`))
		if len(unlabelled) > 0 {
			t.Errorf("%s: fields without a label: %v", pg.name, unlabelled)
		}
	}
}
