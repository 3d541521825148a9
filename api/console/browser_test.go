package console_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The browser tests drive Debian's chromium (headless) through chromedp;
// nothing is downloaded. Each saves screenshots under $CONSOLE_SCREENSHOTS
// (default: <tmp>/n8n-guard-console-screenshots) and logs where.

// browser is one test's headless chromium on a site.
type browser struct {
	*site
	ctx     context.Context
	dir     string
	mu      sync.Mutex
	dialogs []string // JavaScript dialogs the page opened: an XSS that ran
}

func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func newBrowser(t *testing.T, s *site, width, height int) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" && os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed, and CI must run the console's browser tests (.ci/run installs it)")
	}
	if path == "" {
		t.Skip("SKIP: chromium is not installed (apt-get install chromium); the console's browser tests did not run")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "n8n-guard-console-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &browser{site: s, ctx: ctx, dir: dir}
	if err := chromedp.Do(ctx); err != nil { // start the browser now, outside the timeouts below
		t.Fatalf("start chromium: %v", err)
	}
	// A dialog is a script from the store that ran: note it and close it,
	// or the page would wait for it.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// run performs actions with a deadline, failing the test with a
// screenshot of how the page looked.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed-" + what)
		b.t.Fatalf("%s: %v", what, err)
	}
}

// shot saves a full-page screenshot as a test artifact.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
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

func (b *browser) signIn(token string) {
	b.t.Helper()
	b.run("sign in",
		chromedp.Navigate(b.url+"/ui"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`#waiting-h`)),
	)
}

// get runs one action that returns a value.
func get[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.shot("failed-" + what)
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// openKey shows the page of ns/key and waits for sel on it.
func (b *browser) openKey(ns, key, sel string) {
	b.t.Helper()
	b.run("open key "+key, chromedp.Navigate(b.url+"/ui/key?"+url.Values{"namespace": {ns}, "key": {key}}.Encode()),
		chromedp.WaitVisible(chromedp.CSS(sel)))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(get(b, "read "+sel, chromedp.Text(chromedp.CSS(sel))))
}

func (b *browser) exists(sel string) bool {
	b.t.Helper()
	return get(b, "count "+sel, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))) > 0
}

// js runs a script for its effect.
func js(script string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](script)(ctx, t)
		return err
	})
}

func TestBrowserSignIn(t *testing.T) {
	s := newSite(t)
	b := newBrowser(t, s, 1280, 900)
	b.run("open sign-in", chromedp.Navigate(s.url+"/ui"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	b.shot("signin")
	b.run("wrong token",
		chromedp.SendKeys(chromedp.CSS(`#token`), "not-a-token"),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`#signin-problem`)))
	b.shot("signin-refused")
	b.signIn(actToken)
	if got := b.text(`.who`); !strings.Contains(got, "on-call") || !strings.Contains(got, "shared token") {
		t.Errorf("header says %q, want the token's name and that it is a shared token", got)
	}
	cookies := get(b, "cookies", func(ctx context.Context, t *chromedp.Target) ([]*network.Cookie, error) {
		res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
		return res.Cookies, err
	})
	if len(cookies) != 1 || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteStrict {
		t.Errorf("cookies %+v: want one HttpOnly SameSite=Strict session cookie", cookies)
	}
	loc := get(b, "where", chromedp.Location())
	if strings.Contains(loc, actToken) {
		t.Errorf("the token is in the address %s", loc)
	}
	b.shot("overview")
}

// The whole job of the person on call: find the unknown key by prefix,
// decide with a reason, see the state and history change.
func TestBrowserFindAndResolveUnknownKeyByPrefix(t *testing.T) {
	s := newSite(t)
	s.completedKey("bookings", "bk-0001")
	s.unknownKey("bookings", "bk-0042", "n8n exec 4711", "timeout after 30s")
	s.unknownKey("crm", "bk-0042", "n8n exec 9", "another namespace, same key")
	s.unknownKey("bookings", "zz-0042", "n8n exec 5", "another prefix")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.run("search by prefix",
		chromedp.Navigate(s.url+"/ui/keys"),
		chromedp.SendKeys(chromedp.CSS(`#f-namespace`), "bookings"),
		chromedp.SendKeys(chromedp.CSS(`#f-key`), "bk-00"),
		chromedp.SetValue(chromedp.CSS(`#f-state`), "unknown"),
		chromedp.Submit(chromedp.CSS(`#f-key`)),
		chromedp.WaitVisible(chromedp.CSS(`#results`)))
	b.shot("search")
	rows := get(b, "rows", chromedp.Evaluate[int](`document.querySelectorAll('#results tbody tr').length`))
	if rows != 1 {
		t.Fatalf("search found %d rows, want the one unknown key of bookings", rows)
	}
	b.run("open key",
		chromedp.Click(chromedp.CSS(`#results tbody a`)),
		chromedp.WaitVisible(chromedp.CSS(`#resolve-form`)))
	if got := b.text(`#key-state`); got != "unknown" {
		t.Fatalf("state shown %q, want unknown", got)
	}
	b.shot("key-before")
	b.run("decide",
		chromedp.Click(chromedp.CSS(`input[name=action][value=complete]`)),
		chromedp.SendKeys(chromedp.CSS(`#result_ref`), "mail-77"),
		chromedp.SendKeys(chromedp.CSS(`#note`), "checked the Sent folder: the confirmation went out"),
		chromedp.Click(chromedp.CSS(`#resolve-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`.done`)))
	b.shot("key-after")
	if got := b.text(`#key-state`); got != "completed" {
		t.Errorf("state shown %q after the decision, want completed", got)
	}
	if got := b.text(`#history tbody tr:first-child`); !strings.Contains(got, "resolved") ||
		!strings.Contains(got, "console: on-call") || !strings.Contains(got, "checked the Sent folder") {
		t.Errorf("newest history row %q: want the resolution, who and the reason", got)
	}
	r := s.lookup("bookings", "bk-0042")
	if r.State != keystore.StateCompleted || r.ResultRef != "mail-77" || r.ResolvedBy != "console: on-call" {
		t.Errorf("stored record: state %s, result_ref %q, resolved_by %q", r.State, r.ResultRef, r.ResolvedBy)
	}
	if other := s.lookup("crm", "bk-0042"); other.State != keystore.StateUnknown {
		t.Errorf("the same key in another namespace changed to %s", other.State)
	}
}

// A decision without a reason is refused by the page and by the store,
// and changes nothing.
func TestBrowserResolveWithoutReasonChangesNothing(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.openKey("bookings", "bk-1", `#resolve-form`)
	// The browser would stop an empty required field itself; drop the
	// attribute to send it anyway, as a script or an old browser could.
	b.run("send empty reason",
		js(`document.getElementById('note').removeAttribute('required')`),
		chromedp.Click(chromedp.CSS(`input[name=action][value=retry]`)),
		js(`document.getElementById('note').value = '   '`),
		chromedp.Click(chromedp.CSS(`#resolve-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#resolve-problem`)))
	b.shot("refused")
	if got := b.text(`#resolve-problem`); !strings.Contains(got, "note is required") {
		t.Errorf("problem shown %q", got)
	}
	if r := s.lookup("bookings", "bk-1"); r.State != keystore.StateUnknown || len(r.History) != 2 {
		t.Errorf("key changed: state %s, %d history entries", r.State, len(r.History))
	}
}

func TestBrowserReadTokenCannotAct(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-7", "n8n exec 7", "timeout")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(readToken)
	b.openKey("bookings", "bk-7", `#read-only-note`)
	b.shot("key-read-only")
	if b.exists(`#resolve-form`) || b.exists(`#resolve-submit`) {
		t.Fatal("a read token sees the decision form")
	}
	// The route refuses too: post the form the page would have had, with
	// this session's own CSRF token.
	csrf := get(b, "csrf", chromedp.Value(chromedp.CSS(`form.signout input[name=csrf]`)))
	b.run("post anyway", js(fmt.Sprintf(`(() => {
		const f = document.createElement('form'); f.method = 'post'; f.action = '/ui/key/resolve';
		for (const [k, v] of Object.entries({csrf: %q, namespace: 'bookings', key: 'bk-7', action: 'complete', note: 'sneaky'})) {
			const i = document.createElement('input'); i.type = 'hidden'; i.name = k; i.value = v; f.appendChild(i);
		}
		document.body.appendChild(f); f.submit(); return true })()`, csrf)),
		chromedp.WaitVisible(chromedp.CSS(`.problem`)))
	b.shot("refused")
	if got := b.text(`h1`); !strings.HasPrefix(got, "403") {
		t.Errorf("answer %q, want 403", got)
	}
	if r := s.lookup("bookings", "bk-7"); r.State != keystore.StateUnknown {
		t.Errorf("a read token changed the key to %s", r.State)
	}
}

func TestBrowserActionWithoutCSRFIsRefused(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-9", "n8n exec 9", "timeout")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.openKey("bookings", "bk-9", `#resolve-form`)
	b.run("drop the CSRF token and send",
		js(`document.querySelector('#resolve-form input[name=csrf]').remove()`),
		chromedp.Click(chromedp.CSS(`input[name=action][value=complete]`)),
		chromedp.SendKeys(chromedp.CSS(`#note`), "forged"),
		chromedp.Click(chromedp.CSS(`#resolve-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`.problem`)))
	b.shot("refused")
	if got := b.text(`.problem`); !strings.Contains(got, "CSRF") {
		t.Errorf("problem %q, want the CSRF refusal", got)
	}
	if r := s.lookup("bookings", "bk-9"); r.State != keystore.StateUnknown {
		t.Errorf("a CSRF-less action changed the key to %s", r.State)
	}
}

func TestBrowserStoreTextIsShownAsText(t *testing.T) {
	s := newSite(t)
	evil := `<script>alert("key")</script>`
	owner := `<img src=x onerror=alert("owner")>`
	msg := `</td><script>alert("message")</script><b>bold</b>`
	s.unknownKey("crm", evil, owner, msg)
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.shot("overview")
	b.openKey("crm", evil, `#key-name`)
	b.shot("key")
	if got := b.text(`#key-name`); got != evil {
		t.Errorf("key shown as %q, want the text %q", got, evil)
	}
	for _, sel := range []string{`main script`, `main img`, `main b`} {
		if b.exists(sel) {
			t.Errorf("the page has a %s element made from the store's text", sel)
		}
	}
	if body := b.text(`main`); !strings.Contains(body, owner) || !strings.Contains(body, msg) {
		t.Errorf("owner or message not shown as text in:\n%s", body)
	}
	if len(b.dialogs) > 0 {
		t.Errorf("script from the store ran: dialogs %q", b.dialogs)
	}
}

// The overview's chart draws the store's hourly activity.
func TestBrowserOverviewChartDrawsActivity(t *testing.T) {
	s := newSite(t)
	for i := range 12 {
		s.completedKey("orders", fmt.Sprintf("o-%d", i))
	}
	for i := range 5 {
		if _, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "orders", Key: fmt.Sprintf("o-%d", i)}); err != nil {
			t.Fatal(err) // duplicates
		}
	}
	s.unknownKey("orders", "o-late", "n8n exec 3", "timeout")
	b := newBrowser(t, s, 1280, 900)
	b.signIn(actToken)
	b.run("chart", chromedp.WaitVisible(chromedp.CSS(`#activity-chart`)))
	b.shot("overview")
	bars := get(b, "bars", chromedp.Evaluate[map[string]int](`(() => { const n = {};
		for (const r of document.querySelectorAll('#activity-chart rect')) {
			if (r.getBBox().height > 0) n[r.getAttribute('class')] = (n[r.getAttribute('class')] || 0) + 1 }
		return n })()`))
	for _, class := range []string{"accepted", "duplicate", "unknown"} {
		if bars[class] == 0 {
			t.Errorf("no %s bar drawn (bars %v)", class, bars)
		}
	}
	title := get(b, "tooltip", chromedp.Evaluate[string](`document.querySelector('#activity-chart g.bar:last-of-type title').textContent`))
	if !strings.Contains(title, "13 accepted, 5 duplicate, 0 failed, 1 unknown") {
		t.Errorf("the current hour's bar says %q", title)
	}
}

// At 360 px nothing needs sideways scrolling but the tables' own boxes,
// and every action is reachable with the keyboard.
func TestBrowserNarrowScreenAndKeyboard(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-0042", "n8n exec 4711", "timeout after 30s")
	b := newBrowser(t, s, 800, 740)
	// A headless window is at least 500 px wide; emulate the phone.
	b.run("360 px", chromedp.EmulateViewport(360, 740))
	b.signIn(actToken)
	b.shot("overview-360")
	overflow := get(b, "overflow", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if overflow {
		t.Error("the overview is wider than a 360 px screen")
	}
	b.openKey("bookings", "bk-0042", `#resolve-form`)
	b.shot("key-360")
	// Tab from the top until the decision's submit button has the focus.
	reached := get(b, "tab to the button", func(ctx context.Context, t *chromedp.Target) (bool, error) {
		for range 40 {
			if _, err := chromedp.KeyEvent("\t")(ctx, t); err != nil {
				return false, err
			}
			on, err := chromedp.Evaluate[bool](`document.activeElement !== null && document.activeElement.id === 'resolve-submit'`)(ctx, t)
			if err != nil || on {
				return on, err
			}
		}
		return false, nil
	})
	if !reached {
		t.Error("the decision's button cannot be reached with Tab")
	}
	unlabelled := get(b, "labels", chromedp.Evaluate[[]string](`[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
		.filter(e => !(e.labels && e.labels.length)).map(e => e.name)`))
	if len(unlabelled) > 0 {
		t.Errorf("fields without a label: %v", unlabelled)
	}
}
