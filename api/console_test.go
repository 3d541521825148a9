package api_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The console mounted by api.New: the server's own tokens sign in, and
// every answer under /ui carries the CSP.

func consoleClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func uiDo(t *testing.T, c *http.Client, method, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestConsoleSignInWithTheServersTokenAndResolve(t *testing.T) {
	e := start(t)
	r := e.call(t, "POST", "/v1/reserve", map[string]any{"namespace": "bookings", "key": "bk-1", "owner": "n8n exec 1"})
	tok := r.JSON(t)["token"].(string)
	e.call(t, "POST", "/v1/fail", map[string]any{"namespace": "bookings", "key": "bk-1", "token": tok, "reason": "outcome_unknown"})
	c := consoleClient(t)

	resp, _ := uiDo(t, c, "GET", e.url+"/ui", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/signin" {
		t.Fatalf("signed out: %d to %q, want 303 to the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	// A token in the URL signs nobody in.
	resp, _ = uiDo(t, c, "GET", e.url+"/ui/signin?token="+testToken, nil)
	if len(resp.Cookies()) != 0 {
		t.Fatal("a token in the address set a cookie")
	}
	resp, _ = uiDo(t, c, "POST", e.url+"/ui/signin", url.Values{"token": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, _ = uiDo(t, c, "POST", e.url+"/ui/signin", url.Values{"token": {testToken}})
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("sign in: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	ck := resp.Cookies()[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || strings.Contains(ck.Value, testToken) {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, not the token", ck)
	}
	resp, page := uiDo(t, c, "GET", e.url+"/ui/key?namespace=bookings&key=bk-1", nil)
	m := csrfRE.FindStringSubmatch(page)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(page, `id="resolve-form"`) {
		t.Fatalf("key page %d; every token acts until scoped tokens exist, so the form must be there", resp.StatusCode)
	}
	form := url.Values{"namespace": {"bookings"}, "key": {"bk-1"}, "action": {"retry"}, "note": {"the CRM has no contact: try again"}}
	resp, _ = uiDo(t, c, "POST", e.url+"/ui/key/resolve", form)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("without CSRF token: %d, want 403", resp.StatusCode)
	}
	if got := e.call(t, "GET", "/v1/lookup?namespace=bookings&key=bk-1", nil).JSON(t)["state"]; got != "unknown" {
		t.Fatalf("a refused action changed the key to %v", got)
	}
	form.Set("csrf", m[1])
	resp, _ = uiDo(t, c, "POST", e.url+"/ui/key/resolve", form)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resolve: %d", resp.StatusCode)
	}
	rec := e.call(t, "GET", "/v1/lookup?namespace=bookings&key=bk-1", nil).JSON(t)
	if rec["state"] != "failed" || rec["retryable"] != true || rec["resolved_by"] != "console: api token" {
		t.Fatalf("after the decision: %v", rec)
	}
	// A retry is now allowed: the next reserve is accepted.
	if out := e.call(t, "POST", "/v1/reserve", map[string]any{"namespace": "bookings", "key": "bk-1"}).JSON(t)["outcome"]; out != string(keystore.OutcomeAccepted) {
		t.Fatalf("reserve after allow-a-retry: %v", out)
	}
	// Signing out ends the session on the server, not only in the browser.
	resp, _ = uiDo(t, c, "POST", e.url+"/ui/signout", url.Values{"csrf": {m[1]}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	stolen := consoleClient(t)
	u, _ := url.Parse(e.url + "/ui")
	stolen.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: "/"}})
	if resp, _ := uiDo(t, stolen, "GET", e.url+"/ui", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the cookie still works after sign-out: %d", resp.StatusCode)
	}
}
