package console_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The same rules as the browser tests, over plain HTTP, so they hold where
// chromium is not installed.

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func fetch(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func signedIn(t *testing.T, s *site, token string) (*http.Client, string) {
	t.Helper()
	c := client(t)
	resp := postForm(t, c, s.url+"/ui/signin", url.Values{"token": {token}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	_, page := fetch(t, c, s.url+"/ui")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the overview")
	}
	return c, m[1]
}

func TestReadRoleSeesButCannotAct(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	c, csrf := signedIn(t, s, readToken)
	_, page := fetch(t, c, s.url+"/ui/key?namespace=bookings&key=bk-1")
	if strings.Contains(page, "resolve-form") || !strings.Contains(page, "read-only-note") {
		t.Fatal("a read token is offered the decision form")
	}
	for _, action := range []struct {
		path string
		form url.Values
	}{
		{"/ui/key/resolve", url.Values{"namespace": {"bookings"}, "key": {"bk-1"}, "action": {"complete"}, "note": {"x"}}},
		{"/ui/breakers/reset", url.Values{"destination": {"hubspot"}}},
		{"/ui/destination/hold", url.Values{"destination": {"hubspot"}, "until": {"2099-01-01T00:00"}, "reason": {"x"}}},
		{"/ui/destination/end-hold", url.Values{"destination": {"hubspot"}, "reason": {"x"}}},
		{"/ui/notifications/resend", url.Values{"id": {"n_0000000000000000aaaaaaaa"}}},
	} {
		action.form.Set("csrf", csrf)
		resp := postForm(t, c, s.url+action.path, action.form)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with a read token: %d, want 403", action.path, resp.StatusCode)
		}
	}
	if r := s.lookup("bookings", "bk-1"); r.State != keystore.StateUnknown {
		t.Fatalf("a read token changed the key to %s", r.State)
	}
}

func TestActionsNeedTheSessionsCSRFToken(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	c, csrf := signedIn(t, s, actToken)
	_, otherCSRF := signedIn(t, s, actToken)
	form := url.Values{"namespace": {"bookings"}, "key": {"bk-1"}, "action": {"complete"}, "note": {"checked"}}
	for name, token := range map[string]string{"none": "", "another session's": otherCSRF, "altered": csrf + "x"} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if token != "" {
			f.Set("csrf", token)
		}
		resp := postForm(t, c, s.url+"/ui/key/resolve", f)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s CSRF token: %d, want 403", name, resp.StatusCode)
		}
	}
	// A request another site made the browser send.
	req, _ := http.NewRequest(http.MethodPost, s.url+"/ui/key/resolve", strings.NewReader(form.Encode()+"&csrf="+csrf))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", resp.StatusCode)
	}
	if r := s.lookup("bookings", "bk-1"); r.State != keystore.StateUnknown {
		t.Fatalf("a refused action changed the key to %s", r.State)
	}
	form.Set("csrf", csrf)
	resp = postForm(t, c, s.url+"/ui/key/resolve", form)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || s.lookup("bookings", "bk-1").State != keystore.StateCompleted {
		t.Fatalf("with its CSRF token: %d", resp.StatusCode)
	}
}

func TestStoreTextIsEscapedInTheHTML(t *testing.T) {
	s := newSite(t)
	s.unknownKey("crm", `<script>alert(1)</script>`, `<img src=x onerror=alert(2)>`, `"><svg onload=alert(3)>`)
	c, _ := signedIn(t, s, actToken)
	for _, path := range []string{"/ui", "/ui/key?" + url.Values{"namespace": {"crm"}, "key": {`<script>alert(1)</script>`}}.Encode(),
		"/ui/keys?search=1&namespace=crm&state=unknown"} {
		_, page := fetch(t, c, s.url+path)
		for _, raw := range []string{"<script>alert", "<img src=x", "<svg onload"} {
			if strings.Contains(page, raw) {
				t.Errorf("%s: the store's text %q is in the HTML unescaped", path, raw)
			}
		}
		if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the key is not shown as text", path)
		}
	}
}

// Over TLS the cookie is Secure and host-only (__Host- prefix).
func TestSessionCookieIsSecureOverTLS(t *testing.T) {
	store := newSite(t).store
	ui, err := console.New(console.Config{Store: store, SignIn: signIn})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	ui.Mount(app)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}))
	t.Cleanup(func() { app.ShutdownWithTimeout(5 * time.Second) })
	c := client(t)
	c.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	resp := postForm(t, c, "https://"+ln.Addr().String()+"/ui/signin", url.Values{"token": {actToken}})
	resp.Body.Close()
	if len(resp.Cookies()) != 1 {
		t.Fatalf("cookies %v", resp.Cookies())
	}
	ck := resp.Cookies()[0]
	if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || !strings.HasPrefix(ck.Name, "__Host-") || ck.Path != "/" {
		t.Fatalf("cookie over TLS %+v", ck)
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A decision made from Slack reaches the store as a resolve whose by names
// the Slack user; the key page shows it in the history like any other.
func TestKeyHistoryShowsDecisionsMadeInSlack(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-5", "n8n exec 5", "timeout")
	if _, err := s.store.Resolve(s.ctx, keystore.ResolveRequest{Namespace: "bookings", Key: "bk-5",
		Resolution: keystore.StateCompleted, By: "slack: U0ANNA (Anna)", Note: "confirmed in the CRM"}); err != nil {
		t.Fatal(err)
	}
	c, _ := signedIn(t, s, readToken)
	_, page := fetch(t, c, s.url+"/ui/key?namespace=bookings&key=bk-5")
	for _, want := range []string{"slack: U0ANNA (Anna)", "completed: confirmed in the CRM", `id="key-state">completed<`} {
		if !strings.Contains(page, want) {
			t.Errorf("the key page lacks %q", want)
		}
	}
}

func TestResetAnOpenBreaker(t *testing.T) {
	s := newSite(t)
	r, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "crm", Key: "evt_1", Destination: "hubspot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Fail(s.ctx, keystore.FailRequest{Namespace: "crm", Key: "evt_1", Token: r.Token,
		Reason: keystore.ReasonDestinationUnreachable}); err != nil {
		t.Fatal(err)
	}
	c, csrf := signedIn(t, s, actToken)
	_, overview := fetch(t, c, s.url+"/ui")
	if !strings.Contains(overview, ">hubspot</a></strong> — paused: breaker open") {
		t.Fatal("the overview does not list the open breaker")
	}
	_, page := fetch(t, c, s.url+"/ui/breakers")
	if !strings.Contains(page, `aria-label="Reset the breaker of hubspot"`) {
		t.Fatal("no reset button for the open breaker")
	}
	if !strings.Contains(page, `title="open">paused: breaker open</span>`) {
		t.Error("the breakers page does not say in words that the breaker pauses writes")
	}
	if _, key := fetch(t, c, s.url+"/ui/key?namespace=crm&key=evt_1"); !strings.Contains(key, `<dd title="destination_unreachable">destination unreachable</dd>`) {
		t.Error("the key page shows the failure's reason code instead of its words")
	}
	// A token limited to namespaces may not reset a breaker, even one
	// whose destination is called like one of its namespaces: the breaker
	// pauses every namespace that names the destination (as on the API).
	lc, lcsrf := signedIn(t, s, limitedToken)
	if _, page := fetch(t, lc, s.url+"/ui/breakers"); strings.Contains(page, `aria-label="Reset the breaker of hubspot"`) {
		t.Fatal("a token limited to namespaces is offered the reset")
	}
	resp := postForm(t, lc, s.url+"/ui/breakers/reset", url.Values{"csrf": {lcsrf}, "destination": {"hubspot"}, "reason": {"mine now"}})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "without namespace limits") {
		t.Fatalf("a token limited to namespaces bookings, hubspot resets destination hubspot: %d %s", resp.StatusCode, body)
	}
	if b := s.breaker("hubspot"); b.State != keystore.BreakerOpen {
		t.Fatalf("a refused reset changed the breaker: %+v", b)
	}
	// No reason: refused on the page, with nothing changed.
	resp = postForm(t, c, s.url+"/ui/breakers/reset", url.Values{"csrf": {csrf}, "destination": {"hubspot"}, "reason": {"  "}})
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "reason is required") {
		t.Fatalf("reset without a reason: %d %s", resp.StatusCode, body)
	}
	if b := s.breaker("hubspot"); b.State != keystore.BreakerOpen {
		t.Fatalf("a refused reset changed the breaker: %+v", b)
	}
	// From the destination's page, refused: that page again, the reason typed kept.
	resp = postForm(t, c, s.url+"/ui/breakers/reset", url.Values{"csrf": {csrf}, "destination": {"hubspot"}, "from": {"destination"},
		"reason": {strings.Repeat("x", 2001)}})
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `id="reset-reason"`) || !strings.Contains(string(body), strings.Repeat("x", 2001)+"</textarea>") {
		t.Fatalf("refused reset from the destination page: %d, the reason not kept", resp.StatusCode)
	}
	resp = postForm(t, c, s.url+"/ui/breakers/reset", url.Values{"csrf": {csrf}, "destination": {"hubspot"}, "reason": {"CRM confirmed fixed"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	if b := s.breaker("hubspot"); b.State != keystore.BreakerClosed {
		t.Fatalf("after reset: %+v", b)
	}
	if res, _ := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "crm", Key: "evt_2", Destination: "hubspot"}); res.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("a reserve after the reset: %s", res.Outcome)
	}
	evs, _ := s.store.Events(s.ctx, 0, 100)
	if last := evs[len(evs)-1]; last.Kind != keystore.EventBreakerClosed || last.Message != "reset by console: on-call because CRM confirmed fixed" {
		t.Fatalf("last event %+v", last)
	}
	_, page = fetch(t, c, s.url+"/ui/breakers")
	if !strings.Contains(page, "reset by console: on-call because <span class=\"pre\">CRM confirmed fixed</span>, ") {
		t.Errorf("the breaker list does not say who reset it and why")
	}
	_, page = fetch(t, c, s.url+"/ui/destination?name=hubspot")
	if !strings.Contains(page, "CRM confirmed fixed") {
		t.Errorf("the destination page does not say why the breaker was reset")
	}
	_, page = fetch(t, c, s.url+"/ui/audit")
	if !strings.Contains(page, "reset the breaker because CRM confirmed fixed") {
		t.Errorf("the audit list does not say why the breaker was reset")
	}
}

// "Allow a retry" re-runs nothing: the key page says who sends the event
// again, before the decision and after it.
func TestAllowARetrySaysWhoSendsTheEventAgain(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-3", "n8n exec 3", "timeout")
	c, csrf := signedIn(t, s, actToken)
	_, page := fetch(t, c, s.url+"/ui/key?namespace=bookings&key=bk-3")
	if !strings.Contains(page, `id="retry-help"`) || !strings.Contains(page, "The guard re-sends nothing itself: the event is written when its sender sends it again") {
		t.Fatalf("the key page does not say who sends the event again:\n%s", page)
	}
	status, page, loc := post(t, c, s.url+"/ui/key/resolve", url.Values{"csrf": {csrf}, "namespace": {"bookings"}, "key": {"bk-3"}, "action": {"retry"}, "note": {"CRM shows no booking"}})
	if status != http.StatusSeeOther || loc == "" {
		t.Fatalf("resolve: %d %s", status, page)
	}
	_, page = fetch(t, c, s.url+loc)
	if !strings.Contains(page, "A new attempt may start: the next reserve is accepted. The guard re-sends nothing itself") {
		t.Fatalf("the confirmation does not say that nothing is re-sent (%d, %s):\n%s", status, loc, page)
	}
	if r := s.lookup("bookings", "bk-3"); r.State != keystore.StateFailed || !r.Retryable {
		t.Fatalf("key after allow a retry: %s retryable=%v", r.State, r.Retryable)
	}
}

// A destination paused by one namespace's own failures is said to be
// taking writes, paused for that namespace only; a person limited to
// other namespaces reads that some namespace is paused alone, unnamed
// (keystore/breaker_view.go).
func TestABreakerOpenForOneNamespaceIsSaidSo(t *testing.T) {
	s := newSite(t)
	// bookings writes through the destination "bookings"; crm fails two keys.
	r, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "bookings", Key: "bk-1", Destination: "bookings"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Complete(s.ctx, keystore.CompleteRequest{Namespace: "bookings", Key: "bk-1", Token: r.Token}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"evt_1", "evt_2"} {
		r, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Destination: "bookings"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.store.Fail(s.ctx, keystore.FailRequest{Namespace: "crm", Key: key, Token: r.Token, Reason: keystore.ReasonDestinationUnreachable}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := signedIn(t, s, actToken)
	_, page := fetch(t, c, s.url+"/ui/breakers")
	if !strings.Contains(page, `title="closed">taking writes; paused for crm only (its own writes failed)</span>`) {
		t.Fatal("the breakers page does not say the destination is paused for crm only")
	}
	if !strings.Contains(page, `aria-label="Reset the breaker of bookings"`) {
		t.Error("no reset offered for a destination paused for one namespace")
	}
	lc, _ := signedIn(t, s, limitedToken)
	_, page = fetch(t, lc, s.url+"/ui/breakers")
	if !strings.Contains(page, "taking writes; namespaces whose own writes failed are paused alone") || strings.Contains(page, "crm") {
		t.Fatal("a person limited to bookings and hubspot does not read that another namespace is paused alone, or reads its name")
	}
}
