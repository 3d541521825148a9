package console_test

import (
	"context"
	"html"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/api/openid"
	"github.com/n8n-guard/n8n-guard/api/openid/openidtest"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// Named sign-in: a console whose people sign in through a test OpenID
// provider (openidtest, real HTTP on loopback), with the roles below.

const (
	clientID     = "n8n-guard-console"
	clientSecret = "client-secret-0123456789"
)

var people = access.People{
	{Person: "ana@example.com", Role: access.RoleDecide},
	{Person: "rui@example.com", Role: access.RoleRead},
	{Person: "tom@example.com", Role: access.RoleDecide, Namespaces: []string{"bookings"}},
	{Group: "guard-admins", Role: access.RoleAdmin},
}

// clock is the real time, moved on by a test (the identity provider
// keeps the real time).
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// oidcSite is a site whose console signs people in through issuer.
type oidcSite struct {
	*site
	issuer *openidtest.Issuer
	key    []byte
	clock  *clock
	path   string
	addr   string // the address of the first start, kept by restarts
	people access.People
	// tokens is the shared token sign-in (nil: turned off).
	tokens func(string) (access.Principal, error)
	// policies are the store's (four eyes, people).
	policies keystore.Policies
	stop     func()
}

func newOIDCSite(t *testing.T) *oidcSite {
	t.Helper()
	return newOIDCSiteWith(t, keystore.Policies{})
}

// newOIDCSiteWith is a site whose store keeps the policies pol.
func newOIDCSiteWith(t *testing.T, pol keystore.Policies) *oidcSite {
	t.Helper()
	is := openidtest.New(clientID, clientSecret)
	t.Cleanup(is.Close)
	// Another site than the console's 127.0.0.1, as a real provider is:
	// the browser comes back from it by a cross-site navigation.
	is.URL = strings.Replace(is.URL, "127.0.0.1", "localhost", 1)
	key := make([]byte, console.SessionKeySize)
	for i := range key {
		key[i] = byte(i * 7)
	}
	o := &oidcSite{issuer: is, key: key, clock: &clock{}, path: filepath.Join(t.TempDir(), "guard.db"), people: people, tokens: signIn, policies: pol}
	o.start(t)
	t.Cleanup(func() { o.stop() })
	return o
}

// start serves a console on the store file, on a new port: a guard
// (re)started with the same data folder (the same session key).
func (o *oidcSite) start(t *testing.T) {
	t.Helper()
	store, err := bolt.Open(o.path, bolt.Options{Policies: o.policies})
	if err != nil {
		t.Fatal(err)
	}
	if o.addr == "" {
		o.addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		t.Fatal(err)
	}
	o.addr = ln.Addr().String()
	base := "http://" + o.addr
	p, err := openid.New(openid.Config{Issuer: o.issuer.URL, ClientID: clientID, ClientSecret: clientSecret,
		RedirectURL: base + "/ui" + openid.CallbackPath})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := console.New(console.Config{Store: store, SignIn: o.tokens, OpenID: p, People: o.people,
		ProviderName: "Test IdP", SessionKey: o.key, Clock: o.clock.now, SignOutFile: filepath.Join(filepath.Dir(o.path), "console-signouts")})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	ui.Mount(app)
	go app.Listener(ln)
	o.site = &site{t: t, url: base, store: store, ctx: context.Background()}
	o.stop = func() {
		app.ShutdownWithTimeout(5 * time.Second)
		ln.Close() // a shutdown before the server took the listener leaves it open
		store.Close()
	}
}

// restart stops the guard and starts it again on the same data folder
// and address.
func (o *oidcSite) restart(t *testing.T) {
	t.Helper()
	o.stop()
	o.start(t)
}

// rebase points a client's cookies at the restarted guard's new port (a
// browser keeps its cookies for the host, whatever the port).
func (o *oidcSite) rebase(t *testing.T, c *http.Client, from string) {
	t.Helper()
	old, _ := url.Parse(from)
	now, _ := url.Parse(o.url)
	c.Jar.SetCookies(now, c.Jar.Cookies(old))
}

var nextRE = regexp.MustCompile(`href="([^"]+)" id="continue"`)

// signInAs walks the code flow as a browser does: the console sends it to
// the provider, the provider back to the callback. It returns the
// callback's status and page, and the client.
func (o *oidcSite) signInAs(t *testing.T, c *http.Client, p openidtest.Person, start string) (int, string) {
	t.Helper()
	o.issuer.SignIn(p)
	if start == "" {
		start = o.url + "/ui/signin/oidc"
	}
	resp, _ := fetch(t, c, start)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	at := resp.Header.Get("Location")
	if !strings.HasPrefix(at, o.issuer.URL+"/authorize?") {
		return resp.StatusCode, at
	}
	resp, page := fetch(t, c, at)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("provider: %d %s", resp.StatusCode, page)
	}
	resp, page = fetch(t, c, resp.Header.Get("Location"))
	return resp.StatusCode, page
}

func (o *oidcSite) signedInAs(t *testing.T, email string, groups ...string) (*http.Client, string) {
	t.Helper()
	c := client(t)
	status, page := o.signInAs(t, c, openidtest.Person{Email: email, Groups: groups}, "")
	if status != http.StatusOK || !strings.Contains(page, "Signed in as <strong>"+email) {
		t.Fatalf("sign in as %s: %d\n%.600s", email, status, page)
	}
	_, page = fetch(t, c, o.url+"/ui")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the overview after signing in as %s:\n%.600s", email, page)
	}
	return c, m[1]
}

func resolveForm(csrf, ns, key, action, note string) url.Values {
	return url.Values{"csrf": {csrf}, "namespace": {ns}, "key": {key}, "action": {action}, "note": {note}}
}

// A person signs in and decides; the key's history and the audit list
// name them, not a token.
// Mutation tried: by() returning "console: "+name for OIDC sessions too:
// the history check fails.
func TestPersonSignsInAndTheDecisionNamesThem(t *testing.T) {
	o := newOIDCSite(t)
	o.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	c, csrf := o.signedInAs(t, "ana@example.com")
	_, page := fetch(t, c, o.url+"/ui")
	if !strings.Contains(page, "ana@example.com · signed in with OIDC · may decide") {
		t.Fatalf("the header does not name the person and role:\n%.1500s", page)
	}
	resp := postForm(t, c, o.url+"/ui/key/resolve", resolveForm(csrf, "bookings", "bk-1", "retry", "checked the CRM"))
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resolve: %d", resp.StatusCode)
	}
	r := o.lookup("bookings", "bk-1")
	if r.ResolvedBy != "ana@example.com (console, OIDC)" {
		t.Fatalf("resolved by %q", r.ResolvedBy)
	}
	if last := r.History[len(r.History)-1]; last.By != "ana@example.com (console, OIDC)" {
		t.Fatalf("history: %+v", last)
	}
	_, page = fetch(t, c, o.url+"/ui/audit")
	if !strings.Contains(page, "<td>ana@example.com (console, OIDC)</td><td>resolved the key: failed</td>") || !strings.Contains(page, "bookings / bk-1") {
		t.Fatalf("the audit list does not name the decision:\n%s", page)
	}
}

// The provider's answer is checked as the specification says: each way a
// provider (or someone between) gets it wrong refuses the sign-in with a
// message saying which, and no session is made.
// Mutations tried: skipping the nonce comparison in openid.Finish ("bad
// nonce" signs in); oidc.Config with SkipClientIDCheck ("wrong audience"
// signs in).
func TestProviderMistakesRefuseTheSignIn(t *testing.T) {
	o := newOIDCSite(t)
	ana := openidtest.Person{Email: "ana@example.com"}
	no := false
	for _, tc := range []struct {
		name   string
		fault  openidtest.Fault
		person openidtest.Person
		status int
		want   string
	}{
		{"wrong audience", openidtest.WrongAudience, ana, 401, "the ID token is for another application, not client_id"},
		{"expired token", openidtest.Expired, ana, 401, "the ID token expired at"},
		{"bad nonce", openidtest.BadNonce, ana, 401, "does not carry this sign-in&#39;s nonce"},
		{"wrong issuer in the token", openidtest.WrongIssuer, ana, 401, "was issued by another issuer than"},
		{"a key not in the JWKS", openidtest.ForeignKey, ana, 401, "signature"},
		{"unverified email", openidtest.Honest, openidtest.Person{Email: "ana@example.com", EmailVerified: &no}, 401, "has not verified the email ana@example.com"},
		{"no email_verified claim", openidtest.Honest, openidtest.Person{Email: "ana@example.com", NoEmailVerified: true}, 401, "does not say that the identity provider verified the email ana@example.com"},
		{"an invisible character in the email", openidtest.Honest, openidtest.Person{Email: "ana\u200b@example.com"}, 401, "invisible character"},
		{"a person without a role", openidtest.Honest, openidtest.Person{Email: "eve@example.com"}, 403, "eve@example.com signed in at Test IdP but has no role in this console"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o.issuer.Misbehave(tc.fault)
			defer o.issuer.Misbehave(openidtest.Honest)
			c := client(t)
			status, page := o.signInAs(t, c, tc.person, "")
			if status != tc.status || !strings.Contains(page, "Sign-in refused: ") || !strings.Contains(page, tc.want) {
				t.Fatalf("%d, want %d with %q:\n%s", status, tc.status, tc.want, page)
			}
			if resp, _ := fetch(t, c, o.url+"/ui"); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("a refused sign-in left a session: %d", resp.StatusCode)
			}
		})
	}
	t.Run("discovery names another issuer", func(t *testing.T) {
		o.restart(t) // discovery is cached after the first good one
		o.issuer.Misbehave(openidtest.DiscoveryLies)
		defer o.issuer.Misbehave(openidtest.Honest)
		resp, page := fetch(t, client(t), o.url+"/ui/signin/oidc")
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(html.UnescapeString(page), `names issuer "https://elsewhere.example.com"`) {
			t.Fatalf("%d:\n%s", resp.StatusCode, page)
		}
	})
	t.Run("a callback this browser did not start", func(t *testing.T) {
		resp, page := fetch(t, client(t), o.url+"/ui/signin/oidc/callback?code=x&state=y")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "was not started in this browser") {
			t.Fatalf("%d:\n%s", resp.StatusCode, page)
		}
	})
	t.Run("a state that is not the flow's", func(t *testing.T) {
		c := client(t)
		o.issuer.SignIn(ana)
		resp, _ := fetch(t, c, o.url+"/ui/signin/oidc")
		resp, _ = fetch(t, c, resp.Header.Get("Location"))
		back, _ := url.Parse(resp.Header.Get("Location"))
		q := back.Query()
		q.Set("state", "forged")
		back.RawQuery = q.Encode()
		resp, page := fetch(t, c, back.String())
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "was not started in this browser") {
			t.Fatalf("%d:\n%s", resp.StatusCode, page)
		}
	})
}

// Roles come from the people rules, with the same scopes as tokens: read
// sees and may not decide (403 page), decide may not reset a breaker,
// a group's admin may, and namespaces limit a person as they limit a token.
// Mutation tried: admit letting actor routes through without CanAct: the
// read person's decision is accepted.
func TestPeopleRoles(t *testing.T) {
	o := newOIDCSite(t)
	o.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	o.unknownKey("crm", "c-1", "n8n exec 2", "timeout")

	rui, csrf := o.signedInAs(t, "RUI@example.com") // names match case-insensitively
	_, page := fetch(t, rui, o.url+"/ui/key?namespace=bookings&key=bk-1")
	if strings.Contains(page, `id="resolve-form"`) || !strings.Contains(page, `id="read-only-note"`) {
		t.Fatalf("a read person is offered the decision:\n%s", page)
	}
	resp := postForm(t, rui, o.url+"/ui/key/resolve", resolveForm(csrf, "bookings", "bk-1", "retry", "x"))
	body := readAll(resp)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "may only read") {
		t.Fatalf("read person decides: %d\n%s", resp.StatusCode, body)
	}
	if r := o.lookup("bookings", "bk-1"); r.State != keystore.StateUnknown {
		t.Fatalf("the refused decision changed the key: %s", r.State)
	}

	ana, csrf := o.signedInAs(t, "ana@example.com")
	resp = postForm(t, ana, o.url+"/ui/breakers/reset", url.Values{"csrf": {csrf}, "destination": {"hubspot"}})
	if body := readAll(resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "needs the role admin") {
		t.Fatalf("a decide person resets a breaker: %d\n%s", resp.StatusCode, body)
	}

	tom, csrf := o.signedInAs(t, "tom@example.com")
	resp = postForm(t, tom, o.url+"/ui/key/resolve", resolveForm(csrf, "crm", "c-1", "retry", "x"))
	if body := readAll(resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "does not cover namespace") {
		t.Fatalf("tom decides outside his namespace: %d\n%s", resp.StatusCode, body)
	}

	lea, _ := o.signedInAs(t, "lea@example.com", "staff", "guard-admins")
	if _, page := fetch(t, lea, o.url+"/ui"); !strings.Contains(page, "lea@example.com · signed in with OIDC · admin") {
		t.Fatalf("the group's role is not lea's:\n%.1500s", page)
	}
}

// Sessions are sealed in the cookie with the key of the data folder: a
// guard restarted on it keeps the person signed in, and a decision sent
// with the page's form from before the restart is accepted.
// Mutation tried: console.New ignoring Config.SessionKey (a random key at
// every start): the page after the restart redirects to the sign-in.
func TestSessionSurvivesRestart(t *testing.T) {
	o := newOIDCSite(t)
	o.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	c, csrf := o.signedInAs(t, "ana@example.com")
	before := o.url
	o.restart(t)
	o.rebase(t, c, before)
	if resp, _ := fetch(t, c, o.url+"/ui"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the restart the session is gone: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp := postForm(t, c, o.url+"/ui/key/resolve", resolveForm(csrf, "bookings", "bk-1", "retry", "typed before the restart"))
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the form from before the restart: %d", resp.StatusCode)
	}
	if r := o.lookup("bookings", "bk-1"); r.ResolvedBy != "ana@example.com (console, OIDC)" || r.Note != "typed before the restart" {
		t.Fatalf("resolved by %q, note %q", r.ResolvedBy, r.Note)
	}
	// Signing out ends the session for a copy of the cookie as well.
	u, _ := url.Parse(o.url)
	copied := client(t)
	copied.Jar.SetCookies(u, c.Jar.Cookies(u))
	postForm(t, c, o.url+"/ui/signout", url.Values{"csrf": {csrf}}).Body.Close()
	if resp, _ := fetch(t, copied, o.url+"/ui"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a copy of a signed-out cookie still works: %d", resp.StatusCode)
	}
}

// A sign-out holds across a restart: a copy of the signed-out cookie is
// still refused by the guard started again on the same data folder, while
// another person's session lives on; once the sign-outs' sessions have
// expired the file forgets them.
// Mutation tried: keepSignOuts not reading the file (sign-outs in memory
// only): the copy works again after the restart.
func TestSignOutSurvivesRestart(t *testing.T) {
	o := newOIDCSite(t)
	c, csrf := o.signedInAs(t, "ana@example.com")
	other, _ := o.signedInAs(t, "rui@example.com")
	u, _ := url.Parse(o.url)
	copied := client(t)
	copied.Jar.SetCookies(u, c.Jar.Cookies(u))
	postForm(t, c, o.url+"/ui/signout", url.Values{"csrf": {csrf}}).Body.Close()
	before := o.url
	o.restart(t)
	o.rebase(t, copied, before)
	o.rebase(t, other, before)
	if resp, _ := fetch(t, copied, o.url+"/ui"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after a restart a copy of a signed-out cookie works again: %d", resp.StatusCode)
	}
	if resp, _ := fetch(t, other, o.url+"/ui"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another session ended with the restart: %d", resp.StatusCode)
	}
	file := filepath.Join(filepath.Dir(o.path), "console-signouts")
	if b, err := os.ReadFile(file); err != nil || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("sign-outs file: %q %v", b, err)
	}
	o.clock.add(13 * time.Hour) // the signed-out session would have expired
	o.restart(t)
	if b, err := os.ReadFile(file); err != nil || len(b) != 0 {
		t.Fatalf("the file keeps an expired sign-out: %q %v", b, err)
	}
}

var resumeRE = regexp.MustCompile(`id="signin-oidc" href="([^"]+)"`)

// A decision sent after the session ended is not lost: the sign-in page
// carries it, and after signing in the person is back on the key's page
// with the action and reason they typed.
// Mutation tried: signInAgain dropping the form (d.Form = nil): the key
// page after the sign-in has an empty reason.
func TestFormSentAfterTheSessionEndedIsKept(t *testing.T) {
	o := newOIDCSite(t)
	o.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	c, csrf := o.signedInAs(t, "ana@example.com")
	o.clock.add(13 * time.Hour) // past the 12 h session
	note := `called the hotel: no booking <b>"x"</b>`
	req, _ := http.NewRequest(http.MethodPost, o.url+"/ui/key/resolve", strings.NewReader(resolveForm(csrf, "bookings", "bk-1", "final", note).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", o.url+"/ui/key?namespace=bookings&key=bk-1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(resp)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Your session has ended") {
		t.Fatalf("after the session's end: %d\n%s", resp.StatusCode, page)
	}
	if strings.Contains(page, "called the hotel") {
		t.Fatal("the typed reason is in the sign-in page in clear")
	}
	m := resumeRE.FindStringSubmatch(page)
	if m == nil || !strings.Contains(m[1], "resume=") {
		t.Fatalf("the sign-in button does not carry the form:\n%s", page)
	}
	status, page := o.signInAs(t, c, openidtest.Person{Email: "ana@example.com"}, o.url+html.UnescapeString(m[1]))
	next := nextRE.FindStringSubmatch(page)
	if status != http.StatusOK || next == nil {
		t.Fatalf("sign in again: %d\n%s", status, page)
	}
	_, page = fetch(t, c, o.url+html.UnescapeString(next[1]))
	if !strings.Contains(page, "what you typed is kept below") || !strings.Contains(page, html.EscapeString(note)+"</textarea>") ||
		!strings.Contains(page, `value="final" checked`) {
		t.Fatalf("the key page after the sign-in does not have the form as typed:\n%s", page)
	}
	if r := o.lookup("bookings", "bk-1"); r.State != keystore.StateUnknown {
		t.Fatalf("the kept form was applied without being sent again: %s", r.State)
	}
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// The audit list names every decision, wherever it was made, and shows a
// reader limited to namespaces only theirs.
// Mutation tried: audit() without the MayUse filter: tom sees the crm
// decision.
func TestAuditListsDecisionsByNamespace(t *testing.T) {
	o := newOIDCSite(t)
	o.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	o.unknownKey("crm", "c-1", "n8n exec 2", "timeout")
	for _, r := range []keystore.ResolveRequest{
		{Namespace: "bookings", Key: "bk-1", Resolution: keystore.StateCompleted, By: "slack: U0ANA", Note: "done"},
		{Namespace: "crm", Key: "c-1", Resolution: keystore.StateFailed, By: "ops-cli", Note: "retry"},
	} {
		if _, err := o.store.Resolve(o.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	lea, _ := o.signedInAs(t, "lea@example.com", "guard-admins")
	_, page := fetch(t, lea, o.url+"/ui/audit")
	if !strings.Contains(page, "<td>slack: U0ANA</td><td>resolved the key: completed</td>") || !strings.Contains(page, "<td>ops-cli</td>") {
		t.Fatalf("the admin's audit list:\n%s", page)
	}
	if strings.Index(page, "ops-cli") > strings.Index(page, "slack: U0ANA") {
		t.Fatal("the audit list is not newest first")
	}
	tom, _ := o.signedInAs(t, "tom@example.com")
	_, page = fetch(t, tom, o.url+"/ui/audit")
	if !strings.Contains(page, "slack: U0ANA") || strings.Contains(page, "ops-cli") {
		t.Fatalf("tom (bookings only) sees:\n%s", page)
	}
	if resp, page := fetch(t, tom, o.url+"/ui/audit?before=x"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "before must be") {
		t.Fatalf("a bad page cursor: %d", resp.StatusCode)
	}
}

// A page asked for without a session leads to the sign-in and back to
// that page (a shared token sign-in here); the return address stays in
// the console.
// Mutation tried: signedIn ignoring the draft (always the overview): the
// sign-in lands on the overview.
func TestSignInReturnsToThePageAskedFor(t *testing.T) {
	o := newOIDCSite(t)
	o.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	c := client(t)
	resp, _ := fetch(t, c, o.url+"/ui/key?namespace=bookings&key=bk-1")
	at, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || at.Path != "/ui/signin" || at.Query().Get("resume") == "" {
		t.Fatalf("no session: %d %s", resp.StatusCode, at)
	}
	resp = postForm(t, c, o.url+"/ui/signin", url.Values{"token": {actToken}, "resume": {at.Query().Get("resume")}})
	resp.Body.Close()
	if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || got != "/ui/key?namespace=bookings&key=bk-1" {
		t.Fatalf("after the sign-in: %d %q", resp.StatusCode, got)
	}
	for _, bad := range []string{"//evil.example.com/ui", "https://evil.example.com/ui", "/ui/../evil", "/elsewhere", `/\evil.example.com`} {
		if got := console.SafeReturnForTest(bad); got != "/ui" && !strings.HasPrefix(got, "/ui/") || strings.Contains(got, "evil") || strings.Contains(got, "elsewhere") {
			t.Errorf("return address %q kept as %q", bad, got)
		}
	}
}

// A person's role is read from the people rules at each request: a rule
// changed (and the guard restarted) applies to a session at once, and a
// person no rule names any more is signed out.
// Mutation tried: session() keeping the role sealed at the sign-in: rui
// is still read-only after the change.
func TestPeopleRulesApplyToLiveSessions(t *testing.T) {
	o := newOIDCSite(t)
	o.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	rui, _ := o.signedInAs(t, "rui@example.com", "staff")
	o.people = append(access.People{{Person: "rui@example.com", Role: access.RoleDecide}}, people...)
	o.restart(t)
	if _, page := fetch(t, rui, o.url+"/ui/key?namespace=bookings&key=bk-1"); !strings.Contains(page, `id="resolve-form"`) || !strings.Contains(page, "rui@example.com · signed in with OIDC · may decide") {
		t.Fatalf("rui's new role does not apply:\n%.1500s", page)
	}
	o.people = access.People{{Group: "guard-admins", Role: access.RoleAdmin}}
	o.restart(t)
	if resp, _ := fetch(t, rui, o.url+"/ui"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("rui, named by no rule, is still signed in: %d", resp.StatusCode)
	}
}

// With the shared token sign-in turned off, the sign-in page offers the
// provider only, and a token sent anyway is refused.
func TestSharedTokenSignInOff(t *testing.T) {
	o := newOIDCSite(t)
	o.tokens = nil
	o.restart(t)
	_, page := fetch(t, client(t), o.url+"/ui/signin")
	if strings.Contains(page, `id="token"`) || !strings.Contains(page, `id="signin-oidc"`) {
		t.Fatalf("sign-in page:\n%s", page)
	}
	resp := postForm(t, client(t), o.url+"/ui/signin", url.Values{"token": {actToken}})
	if body := readAll(resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "turned off here") {
		t.Fatalf("a shared token: %d\n%s", resp.StatusCode, body)
	}
}
