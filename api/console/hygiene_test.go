package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The CSRF token counts only in the form body: the same token in the
// query string of a POST is refused, and the action changes nothing.
func TestCSRFTokenOnlyFromTheBody(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-9", "n8n exec 9", "timeout")
	c, csrf := signedIn(t, s, actToken)
	form := url.Values{"namespace": {"bookings"}, "key": {"bk-9"}, "action": {"complete"}, "note": {"sent"}}
	resp := postForm(t, c, s.url+"/ui/key/resolve?csrf="+url.QueryEscape(csrf), form)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "CSRF") {
		t.Fatalf("CSRF token in the query string: %d", resp.StatusCode)
	}
	if r := s.lookup("bookings", "bk-9"); r.State != "unknown" {
		t.Fatalf("the key changed: %s", r.State)
	}
	form.Set("csrf", csrf)
	resp = postForm(t, c, s.url+"/ui/key/resolve", form)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the same form with the token in its body: %d", resp.StatusCode)
	}
}

// The API token of a sign-in is read from the body only.
func TestSignInTokenOnlyFromTheBody(t *testing.T) {
	s := newSite(t)
	resp := postForm(t, client(t), s.url+"/ui/signin?token="+actToken, url.Values{})
	resp.Body.Close()
	if resp.StatusCode == http.StatusSeeOther {
		t.Fatal("a token in the query string signed in")
	}
}

// Signing in gives a new session id, and the session the browser held
// before ends.
func TestSignInRotatesTheSession(t *testing.T) {
	s := newSite(t)
	c, _ := signedIn(t, s, actToken)
	u, _ := url.Parse(s.url)
	old := c.Jar.Cookies(u)
	if len(old) != 1 {
		t.Fatalf("cookies after sign-in: %v", old)
	}
	resp := postForm(t, c, s.url+"/ui/signin", url.Values{"token": {readToken}})
	resp.Body.Close()
	now := c.Jar.Cookies(u)
	if resp.StatusCode != http.StatusSeeOther || len(now) != 1 || now[0].Value == old[0].Value {
		t.Fatalf("second sign-in: %d, cookies %v (before %v)", resp.StatusCode, now, old)
	}
	// The old id, replayed by someone who kept it, is signed out.
	replay := client(t)
	replay.Jar.SetCookies(u, old)
	resp, _ = fetch(t, replay, s.url+"/ui")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "/ui/signin") {
		t.Fatalf("the session from before the sign-in still works: %d", resp.StatusCode)
	}
	if resp, _ := fetch(t, c, s.url+"/ui"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the new session: %d", resp.StatusCode)
	}
}

// Sign-in attempts are limited per client, with a message that says so;
// a correct token is refused too while the client is over its limit.
func TestSignInAttemptsAreLimited(t *testing.T) {
	s := newSite(t)
	c := client(t)
	for i := range 10 {
		resp := postForm(t, c, s.url+"/ui/signin", url.Values{"token": {"guess-" + string(rune('a'+i))}})
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, resp.StatusCode)
		}
	}
	resp := postForm(t, c, s.url+"/ui/signin", url.Values{"token": {actToken}})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), "Too many sign-in attempts from your address") {
		t.Fatalf("attempt 11: %d %s\n%.400s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}
