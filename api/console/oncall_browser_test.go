package console_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	"github.com/n8n-guard/n8n-guard/notify/decision"
	slackapi "github.com/n8n-guard/n8n-guard/slack"
)

// newOnCallSite is the night the person on call opens the console to:
// completed keys, 30 unknown keys of one HubSpot outage (its breaker open)
// and 4 of another namespace, two parked executions n8n lost, two
// overdue behind a maintenance window, five invoices awaiting approval,
// ten failed executions of which two went to a channel Slack refuses (the
// owner was never told). Owners, channels and approvers come from the
// notifications' config, as in production.
func newOnCallSite(t *testing.T) *site {
	t.Helper()
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		"invoices":  {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}},
		"marketing": {ParkedLimit: time.Nanosecond}, // its parked keys are overdue at once
	}}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	notes := onCallNotifications(t, store)
	s, stop, err := serveConfig(console.Config{Store: store, SignIn: signIn, Refresh: -1, Policies: pol, Parking: store,
		Notifications: notes, Resender: notes, Thread: notes, SlackWorkspace: "acme", N8nURL: n8nBase})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t

	for i := range 40 {
		s.completedKey("crm", fmt.Sprintf("lead-done-%03d", i))
	}
	// The HubSpot outage: 30 writes under way timed out (the breaker
	// opened after the first few answers).
	tokens := map[string]string{}
	for i := range 30 {
		key := fmt.Sprintf("lead-%03d", i)
		res, err := store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Destination: "hubspot", Owner: fmt.Sprintf("n8n w7 exec %d", 500+i)})
		if err != nil || res.Outcome != keystore.OutcomeAccepted {
			t.Fatalf("reserve %s: %v %v", key, res.Outcome, err)
		}
		tokens[key] = res.Token
	}
	for key, token := range tokens {
		if _, err := store.Fail(s.ctx, keystore.FailRequest{Namespace: "crm", Key: key, Token: token, Reason: keystore.ReasonOutcomeUnknown,
			Message: "timeout after 30s waiting for HubSpot"}); err != nil {
			t.Fatal(err)
		}
	}
	s.parkedKey("crm", "lead-park-0", "hubspot", n8nBase+"/webhook-waiting/700")
	s.lostKey("crm", "lead-lost-0", "hubspot", n8nBase+"/webhook-waiting/701")
	s.lostKey("crm", "lead-lost-1", "hubspot", n8nBase+"/webhook-waiting/702")
	if br := s.breaker("hubspot"); br.State != keystore.BreakerOpen {
		t.Fatalf("hubspot's breaker %s, want open", br.State)
	}
	for i := range 4 {
		s.unknownKey("orders", fmt.Sprintf("order-%d", i), "n8n w9 exec 9"+fmt.Sprint(i), "timeout")
	}
	// Mailchimp is held for its upgrade; two events of marketing wait
	// behind the window, longer than marketing's parked_limit.
	if _, err := store.HoldDestination(s.ctx, "mailchimp", "ana@example.com (console, OIDC)", "Mailchimp upgrade, OPS-12", time.Now().Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		s.parkedKey("marketing", fmt.Sprintf("sub-%d", i), "mailchimp", n8nBase+"/webhook-waiting/80"+fmt.Sprint(i))
	}
	for i := range 5 {
		res, err := store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "invoices", Key: fmt.Sprintf("inv-47%02d", i), Destination: "billing-api",
			Owner: "n8n w3 exec 6" + fmt.Sprint(i), RequestedBy: "jo@example.com", ResumeURL: n8nBase + "/webhook-waiting/6" + fmt.Sprint(i),
			Fingerprint: "invoice " + fmt.Sprint(i)})
		if err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve an invoice: %+v %v", res, err)
		}
	}
	return s
}

// onCallNotifications is the notifications' side: a Slack that takes
// every message but those to C0GONE (channel_not_found, as Slack
// answers), and ten failed executions, two of Billing's (routed to
// C0GONE, so they die).
func onCallNotifications(t *testing.T, store *bolt.Store) consoleThread {
	t.Helper()
	var ts atomic.Int64
	slack := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		ch := r.Form.Get("channel")
		if ch == "C0GONE" {
			w.Write([]byte(`{"ok":false,"error":"channel_not_found"}`))
			return
		}
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":"1700000000.%06d"}`, ch, ts.Add(1))
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
	cfg := notify.Config{DefaultChannel: "C0ONCALL", DefaultOwner: "U0ONCALL",
		Namespaces: map[string]notify.Route{
			"crm":      {Owner: "U0ANA", Channel: "C0CRM"},
			"invoices": {Owner: "U0FINLEAD", Channel: "C0FIN", Approvers: []string{"U0FIN1", "U0FIN2"}},
		},
		Destinations: map[string]notify.Route{"hubspot": {Owner: "U0HUBOPS", Channel: "C0CRMOPS"}},
		Owners:       []notify.OwnerRule{{Workflow: "Billing*", Owner: "U0BILLING", Channel: "C0GONE"}},
	}
	client := slackapi.New(slackapi.Options{Token: "xoxb-test", APIURL: "http://" + ln.Addr().String() + "/api/"})
	svc, err := notify.New(cfg, notify.Options{Outbox: outbox, PollInterval: 10 * time.Millisecond, Slack: client})
	if err != nil {
		t.Fatal(err)
	}
	notes := decisionsOn(t, svc, decision.Options{Outbox: outbox, Slack: client})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { notes.Run(ctx); close(done) }()
	t.Cleanup(sync.OnceFunc(func() { cancel(); <-done }))
	for i := range 10 {
		wf := fmt.Sprintf("Orders sync %d", i)
		if i >= 8 {
			wf = fmt.Sprintf("Billing run %d", i)
		}
		body := fmt.Sprintf(`{"execution":{"id":"9%02d","error":{"message":"HTTP 500 from the API (%d)"},"lastNodeExecuted":"Write"},"workflow":{"id":"wf%d","name":%q}}`, i, i, i, wf)
		if _, err := notes.Intake(ctx, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until Slack took or refused every one.
	var pending, dead int
	if !testwait.Poll(testwait.Deadline, func() bool {
		p, err := notes.List(ctx, notify.ListQuery{Status: notify.StatusPending})
		if err != nil {
			t.Fatal(err)
		}
		d, err := notes.List(ctx, notify.ListQuery{Status: notify.StatusDead})
		if err != nil {
			t.Fatal(err)
		}
		pending, dead = len(p.Items), len(d.Items)
		return pending == 0 && dead == 2
	}) {
		t.Fatalf("notifications still pending %d, dead %d", pending, dead)
	}
	return notes
}

// firstScreen saves what the screen shows without scrolling.
func (b *browser) firstScreen(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(b.dir, strings.ReplaceAll(b.t.Name(), "/", "_")+"-"+name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", file)
}

// needsOnScreen reads each "needs a person" row: its kind, count, the
// whole text, and whether it lies wholly on the first screen.
const needsOnScreen = `[...document.querySelectorAll('#needs li.need')].map(li => { const r = li.getBoundingClientRect();
	return {kind: li.dataset.need, count: li.querySelector('.need-count').textContent.trim(), text: li.textContent.replace(/\s+/g, ' ').trim(),
		owner: (li.querySelector('.need-owner') || {textContent: ''}).textContent.replace(/\s+/g, ' ').trim(),
		href: li.querySelector('.need-act a').getAttribute('href'), onScreen: r.top >= 0 && r.bottom <= window.innerHeight} })`

type needSeen struct {
	Kind, Count, Text, Owner, Href string
	OnScreen                       bool
}

// The overview's first screen, on a desktop and a phone, light and dark:
// every group that needs a person is one row with its count and owner,
// the outage's 30 keys one row with the open breaker and a bulk link,
// the failed executions whose owner was never told first among the
// failures and marked, the approvals with their approvers.
func TestBrowserOverviewSaysWhatNeedsAPerson(t *testing.T) {
	s := newOnCallSite(t)
	want := []struct {
		kind, count, owner string
		has                []string
	}{
		{"unknown", "30", "U0ANA", []string{"crm → hubspot", "paused: breaker open", "outcome unknown", "Decide these 30 keys"}},
		{"unknown", "4", "U0ONCALL", []string{"orders", "Decide these 4 keys"}},
		{"approval", "5", "U0FIN1, U0FIN2", []string{"invoices", "approval", "Review approvals"}},
		{"not-told", "2", "U0BILLING", []string{"owner not told", "could not be delivered"}},
		{"failure", "8", "U0ONCALL", []string{"nobody acknowledged", "Acknowledge"}},
		{"lost", "2", "U0ANA", []string{"crm → hubspot", "lost"}},
		{"overdue", "2", "U0ONCALL", []string{"marketing → mailchimp", "paused: maintenance window", "overdue"}},
	}
	for _, size := range []struct {
		name          string
		width, height int
	}{{"1280", 1280, 900}, {"390", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			s := *s // the same console, this test's failures
			s.t = t
			b := newBrowser(t, &s, 800, 900)
			b.run("size", chromedp.EmulateViewport(int64(size.width), int64(size.height)))
			b.signIn(actToken)
			for _, dark := range []bool{false, true} {
				scheme := "light"
				if dark {
					scheme = "dark"
				}
				b.run(scheme, darkScheme(dark), chromedp.Navigate(s.url+"/ui"), chromedp.WaitVisible(chromedp.CSS(`#needs`)))
				b.firstScreen("first-screen-" + size.name + "-" + scheme)
				checkContrast(t, b, "overview", dark)
				rows := get(b, "needs", chromedp.Evaluate[[]needSeen](needsOnScreen))
				if len(rows) != len(want) {
					t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
				}
				for i, w := range want {
					r := rows[i]
					if r.Kind != w.kind || r.Count != w.count || !strings.Contains(r.Owner, w.owner) {
						t.Errorf("row %d: %s %s owner %q, want %s %s owner %q (%s)", i, r.Kind, r.Count, r.Owner, w.kind, w.count, w.owner, r.Text)
					}
					for _, h := range w.has {
						if !strings.Contains(r.Text, h) {
							t.Errorf("row %d (%s) does not say %q: %s", i, r.Kind, h, r.Text)
						}
					}
					if !r.OnScreen {
						t.Errorf("row %d (%s) is not on the first screen at %s px (%s)", i, r.Kind, size.name, scheme)
					}
				}
				if href := rows[0].Href; !strings.HasPrefix(href, "/ui/bulk?") || !strings.Contains(href, "destination=hubspot") || !strings.Contains(href, "reason=outcome_unknown") {
					t.Errorf("the outage's action opens %q, want its bulk decision", href)
				}
			}
			// The outage's action opens the bulk decision of its 30 keys;
			// after Review the question and its button are on the first
			// screen, in words that say what happens.
			b.run("open the outage", chromedp.Click(chromedp.CSS(`#needs li.need-unknown .need-act a`)), chromedp.WaitVisible(chromedp.CSS(`#bulk-count`)))
			if got := b.text(`#bulk-decidable`); got != "30" {
				t.Errorf("the outage's bulk page can decide %q keys, want 30", got)
			}
			order := get(b, "options", chromedp.Evaluate[string](`[...document.querySelectorAll('#bulk-form input[name=action]')].map(i => i.value).join(' ')`))
			if order != "complete retry final" {
				t.Errorf("the bulk options read %q, want the key page's order complete retry final", order)
			}
			b.run("review",
				chromedp.Click(chromedp.CSS(`input[name=action][value=retry]`)),
				chromedp.SendKeys(chromedp.CSS(`#bulk-note`), "HubSpot was down 02:10-02:40; nothing reached it"),
				chromedp.Click(chromedp.CSS(`#bulk-submit`)),
				chromedp.WaitVisible(chromedp.CSS(`#bulk-confirm`)))
			b.firstScreen("bulk-confirm-" + size.name)
			if got := b.text(`#bulk-question`); got != "Allow 30 events to be sent again?" {
				t.Errorf("question %q", got)
			}
			seen := get(b, "confirm on screen", chromedp.Evaluate[map[string]any](`(() => { const r = document.querySelector('#bulk-confirm-submit').getBoundingClientRect();
				return {top: r.top, bottom: r.bottom, height: window.innerHeight, scrolled: window.scrollY, label: document.querySelector('#bulk-confirm-submit').textContent.trim()} })()`))
			if seen["top"].(float64) < 0 || seen["bottom"].(float64) > seen["height"].(float64) || seen["scrolled"].(float64) != 0 {
				t.Errorf("the confirm button is not on the first screen after Review: %v", seen)
			}
			if seen["label"] != "Allow 30 events to be sent again" {
				t.Errorf("the confirm button reads %q", seen["label"])
			}
		})
	}
}

// Parked keys say what they wait for: an approval never reads "nothing
// to do", on the parked list, the destination's page and the key's page.
func TestBrowserApprovalsNeverReadNothingToDo(t *testing.T) {
	s := newOnCallSite(t)
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	for _, p := range []struct{ name, path, ready string }{
		{"parked", "/ui/parked?namespace=invoices", "#parked-list"},
		{"destination", "/ui/destination?name=billing-api", "#dest-parked-h"},
	} {
		b.run("open "+p.name, chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		b.shot("approvals-" + p.name)
		rows := get(b, "rows", chromedp.Evaluate[[]map[string]string](`[...document.querySelectorAll('table.parked-keys tbody tr')].map(tr => ({key: tr.dataset.key,
			status: tr.querySelector('td.state').textContent.trim(), next: tr.querySelector('td.next').textContent.trim()}))`))
		if len(rows) != 5 {
			t.Fatalf("%s: %d rows, want the 5 invoices: %v", p.name, len(rows), rows)
		}
		for _, r := range rows {
			if r["status"] != "awaiting approval" || strings.Contains(strings.ToLower(r["next"]), "nothing to do") || !strings.Contains(r["next"], "approval") {
				t.Errorf("%s: %s reads %q / %q", p.name, r["key"], r["status"], r["next"])
			}
		}
	}
	b.openKey("invoices", "inv-4700", `#parked`)
	if got := b.text(`#parked-next`); strings.Contains(strings.ToLower(got), "nothing to do") || b.text(`#parked-status`) != "awaiting approval" {
		t.Errorf("the key page reads %q / %q", b.text(`#parked-status`), got)
	}
	// A key waiting for its destination still says so.
	b.openKey("crm", "lead-park-0", `#parked`)
	if got := b.text(`#parked-status`); got != "waiting for the destination" {
		t.Errorf("a parked key of the outage reads %q", got)
	}
}

// The audit lists maintenance windows (set, ended early) and breaker
// resets with who and why, next to the keys' decisions.
func TestBrowserAuditShowsMaintenanceWindowsAndResets(t *testing.T) {
	s := newOnCallSite(t)
	store := s.store.(*bolt.Store)
	if _, err := store.EndHold(s.ctx, "mailchimp", "ben@example.com (console, OIDC)", "upgrade finished early"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ResetBreaker(s.ctx, "hubspot", "ana@example.com (console, OIDC)", "HubSpot status page: resolved"); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.run("audit", chromedp.Navigate(s.url+"/ui/audit"), chromedp.WaitVisible(chromedp.CSS(`#audit`)))
	b.shot("audit")
	rows := get(b, "rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#audit tbody tr')].map(tr => [...tr.cells].map(td => td.textContent.trim()).join(' | '))`))
	want := []string{
		"ana@example.com (console, OIDC) | reset the breaker because HubSpot status page: resolved | hubspot",
		"ben@example.com (console, OIDC) | ended the maintenance window early because upgrade finished early | mailchimp",
		"ana@example.com (console, OIDC) | set a maintenance window until",
	}
	for _, w := range want {
		found := false
		for _, r := range rows {
			found = found || strings.Contains(r, w)
		}
		if !found {
			t.Errorf("the audit has no row %q: %q", w, rows)
		}
	}
	for _, r := range rows {
		if strings.Contains(r, "Mailchimp upgrade, OPS-12") && !strings.Contains(r, "set a maintenance window") {
			t.Errorf("the window's row reads %q", r)
		}
	}
	if n := len(rows); n != 3 {
		t.Errorf("%d audit rows, want 3 (the hubspot outage's own opening names nobody): %q", n, rows)
	}
}

// Every list names who owns what it shows (person and channel, from the
// notifications' config): the breakers and a destination's page its
// owner, the parked keys their namespace's owner (an approval its
// approvers), the approvals their approvers, the failed executions
// their owner with "owner not told" where the Slack message died, the
// search and the overview's unknown keys their namespace's owner. On a
// phone too.
func TestBrowserOwnersOnEveryList(t *testing.T) {
	s := newOnCallSite(t)
	for _, size := range []struct {
		name          string
		width, height int
	}{{"1280", 1280, 900}, {"390", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			s := *s
			s.t = t
			b := newBrowser(t, &s, 800, 900)
			b.run("size", chromedp.EmulateViewport(int64(size.width), int64(size.height)))
			b.signIn(actToken)
			for _, c := range []struct{ page, path, ready, cell, want string }{
				{"breakers", "/ui/breakers", "#breakers", `tr[data-destination=hubspot] td.owner`, "U0HUBOPS #C0CRMOPS"},
				{"destination", "/ui/destination?name=hubspot", "#dest-owner", `#dest-owner`, "U0HUBOPS #C0CRMOPS"},
				{"parked", "/ui/parked?namespace=crm", "#parked-list", `tr[data-key=lead-lost-0] td.owner`, "U0ANA #C0CRM"},
				{"parked approval", "/ui/parked?namespace=invoices", "#parked-list", `tr[data-key=inv-4700] td.owner`, "U0FIN1, U0FIN2"},
				{"approvals", "/ui/approvals", "#approvals", `#approval-inv-4700 td.owner`, "U0FIN1, U0FIN2"},
				{"failures", "/ui/failures", "#failures", `#failures tbody tr:has(.mark) td.owner`, "U0BILLING #C0GONE owner not told"},
				{"search", "/ui/keys?search=1&state=unknown&namespace=crm", "#results", `#results tbody tr td.owner`, "U0ANA #C0CRM"},
				{"overview", "/ui", "#waiting", `#waiting tbody tr td.owner`, "U0ANA #C0CRM"},
			} {
				b.run("open "+c.page, chromedp.Navigate(s.url+c.path), chromedp.WaitVisible(chromedp.CSS(c.ready)))
				got := get(b, "owner on "+c.page, chromedp.Evaluate[map[string]any](fmt.Sprintf(`(() => { const td = document.querySelector(%q);
					return td ? {text: td.textContent.replace(/\s+/g, ' ').trim(), shown: td.getClientRects().length > 0} : {text: '', shown: false} })()`, c.cell)))
				if got["text"] != c.want || got["shown"] != true {
					b.shot("owner-" + c.page)
					t.Errorf("%s at %s px: owner %v, want %q shown", c.page, size.name, got, c.want)
				}
			}
			b.run("failures", chromedp.Navigate(s.url+"/ui/failures"), chromedp.WaitVisible(chromedp.CSS(`#failures`)))
			b.shot("failures-" + size.name)
			if n := get(b, "not told", chromedp.Evaluate[int](`document.querySelectorAll('#failures .mark').length`)); n != 2 {
				t.Errorf("%d failures marked owner not told, want the 2 whose Slack message died", n)
			}
		})
	}
}

// An approval gives the approver something to judge and says what
// follows: the list shows each event's destination and its state,
// Reject is drawn as the destructive choice and asks its reason, and an
// approval while the destination is held says the write happens after
// the window, not now.
func TestBrowserApprovalDuringAHoldSaysWhenItWrites(t *testing.T) {
	s := newOnCallSite(t)
	until := time.Now().Add(2 * time.Hour)
	if _, err := s.store.(*bolt.Store).HoldDestination(s.ctx, "billing-api", "ana@example.com (console, OIDC)", "billing upgrade", until); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.run("approvals", chromedp.Navigate(s.url+"/ui/approvals"), chromedp.WaitVisible(chromedp.CSS(`#approvals`)))
	b.shot("approvals-held")
	if got := b.text(`#approval-inv-4700 td.dest`); got != "billing-api (paused: maintenance window)" {
		t.Errorf("the approval's destination reads %q", got)
	}
	colors := get(b, "buttons", chromedp.Evaluate[map[string]string](`({approve: getComputedStyle(document.querySelector('#approval-inv-4700 button.approve')).backgroundColor,
		reject: getComputedStyle(document.querySelector('#approval-inv-4700 button.reject')).backgroundColor,
		required: String(document.querySelector('#note-inv-4700').required)})`))
	if colors["approve"] == colors["reject"] || colors["reject"] != "rgb(207, 34, 46)" || colors["required"] != "true" {
		t.Errorf("Reject is not drawn as the destructive choice with a required reason: %v", colors)
	}
	b.run("approve", chromedp.Click(chromedp.CSS(`#approval-inv-4700 button.approve`)), chromedp.WaitVisible(chromedp.CSS(`#approval-done`)))
	b.shot("approved-during-hold")
	got := b.text(`#approval-done`)
	if !strings.Contains(got, "billing-api is held for maintenance until "+until.UTC().Format("2006-01-02 15:04 UTC")) || !strings.Contains(got, "writes after the window") {
		t.Errorf("the approval says %q, want when the write happens", got)
	}
}

// A named token's person is in the header, not "shared token".
func TestHeaderNamesANamedTokensPerson(t *testing.T) {
	s := newSite(t)
	for token, want := range map[string]string{namedToken: "ana-laptop · ana@example.com's token", actToken: "on-call · shared token"} {
		c, _ := signedIn(t, s, token)
		_, page := fetch(t, c, s.url+"/ui")
		if !strings.Contains(page, want) {
			i := strings.Index(page, `id="who"`)
			t.Errorf("header %.120s, want %q", page[i:], want)
		}
	}
}
