package api_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/access"
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
		t.Fatalf("key page %d; a token without a scope is an admin, so the form must be there", resp.StatusCode)
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
	if rec["state"] != "failed" || rec["retryable"] != true || rec["resolved_by"] != "console: token-1" {
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

// Roles come from the scoped tokens: a reserve token (a team's n8n) may
// not sign in, a read token sees but cannot act, an admin token acts, each
// only within its namespaces.
func TestConsoleRolesFromScopedTokens(t *testing.T) {
	e := start(t, withScopes())
	for _, n := range []string{ns, "billing"} {
		r := e.call(t, "POST", "/v1/reserve", map[string]any{"namespace": n, "key": "evt_w", "owner": "n8n exec 1"})
		e.call(t, "POST", "/v1/fail", map[string]any{"namespace": n, "key": "evt_w", "token": r.JSON(t)["token"], "reason": "outcome_unknown"})
		// A breaker per team: destinations named as the namespaces.
		r = e.call(t, "POST", "/v1/reserve", map[string]any{"namespace": n, "key": "evt_b", "destination": n + "-crm"})
		e.call(t, "POST", "/v1/fail", map[string]any{"namespace": n, "key": "evt_b", "token": r.JSON(t)["token"], "reason": "destination_unreachable"})
		r = e.call(t, "POST", "/v1/reserve", map[string]any{"namespace": n, "key": "evt_d", "destination": n})
		e.call(t, "POST", "/v1/fail", map[string]any{"namespace": n, "key": "evt_d", "token": r.JSON(t)["token"], "reason": "destination_unreachable"})
	}
	signIn := func(token string) (*http.Client, int, string) {
		c := consoleClient(t)
		resp, _ := uiDo(t, c, "POST", e.url+"/ui/signin", url.Values{"token": {token}})
		if resp.StatusCode != http.StatusSeeOther {
			return c, resp.StatusCode, ""
		}
		_, page := uiDo(t, c, "GET", e.url+"/ui", nil)
		m := csrfRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatal("no CSRF token on the overview")
		}
		return c, resp.StatusCode, m[1]
	}
	if _, status, _ := signIn(scopedTokens[access.RoleReserve]); status != http.StatusForbidden {
		t.Fatalf("a reserve token signed in: %d", status)
	}
	keyPath := "/ui/key?namespace=" + ns + "&key=evt_w"
	resolve := url.Values{"namespace": {ns}, "key": {"evt_w"}, "action": {"complete"}, "note": {"found it in the CRM"}}

	read, _, csrf := signIn(scopedTokens[access.RoleRead])
	if _, page := uiDo(t, read, "GET", e.url+keyPath, nil); strings.Contains(page, `id="resolve-form"`) {
		t.Error("a read token is offered the decision form")
	}
	if resp, _ := uiDo(t, read, "GET", e.url+"/ui/key?namespace=billing&key=evt_w", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a token of %s read a key of billing: %d", ns, resp.StatusCode)
	}
	resolve.Set("csrf", csrf)
	if resp, _ := uiDo(t, read, "POST", e.url+"/ui/key/resolve", resolve); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read token resolved: %d", resp.StatusCode)
	}
	// Only its namespaces' breakers; no notifications, which are not kept
	// by namespace.
	if _, page := uiDo(t, read, "GET", e.url+"/ui/breakers", nil); !strings.Contains(page, ">"+ns+"<") || strings.Contains(page, "billing") {
		t.Errorf("a token of %s sees these breakers:\n%s", ns, page)
	}
	if resp, page := uiDo(t, read, "GET", e.url+"/ui/notifications", nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "limited to namespaces") {
		t.Errorf("a token of %s opened the notifications: %d", ns, resp.StatusCode)
	}
	if _, page := uiDo(t, read, "GET", e.url+"/ui", nil); strings.Contains(page, "billing") {
		t.Errorf("the overview of a token of %s shows billing", ns)
	}

	admin, _, csrf := signIn(scopedTokens[access.RoleAdmin])
	other := url.Values{"namespace": {"billing"}, "key": {"evt_w"}, "action": {"complete"}, "note": {"x"}, "csrf": {csrf}}
	if resp, _ := uiDo(t, admin, "POST", e.url+"/ui/key/resolve", other); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an admin of %s resolved a key of billing: %d", ns, resp.StatusCode)
	}
	reset := url.Values{"destination": {"billing"}, "csrf": {csrf}}
	if resp, _ := uiDo(t, admin, "POST", e.url+"/ui/breakers/reset", reset); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an admin of %s reset billing's breaker: %d", ns, resp.StatusCode)
	}
	resolve.Set("csrf", csrf)
	if resp, _ := uiDo(t, admin, "POST", e.url+"/ui/key/resolve", resolve); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("an admin token could not resolve: %d", resp.StatusCode)
	}
	for n, want := range map[string]string{ns: "completed", "billing": "unknown"} {
		rec := e.call(t, "GET", "/v1/lookup?namespace="+n+"&key=evt_w", nil).JSON(t)
		if rec["state"] != want {
			t.Errorf("%s/evt_w is %v, want %s", n, rec["state"], want)
		}
		if n == ns && rec["resolved_by"] != "console: team-admin" {
			t.Errorf("resolved_by %v", rec["resolved_by"])
		}
	}
}

// One rule for deciding many keys at once (access.BulkScope): a role may
// on the API (POST /v1/keys/resolve-bulk) exactly when it may on the
// console's bulk page, where it is also offered the form; the console
// refuses a selection of every key with the domain's words.
func TestBulkDecisionsNeedTheSameRoleOnTheAPIAndTheConsole(t *testing.T) {
	e := start(t, withScopes())
	for i := range 3 {
		r := e.call(t, "POST", "/v1/reserve", map[string]any{"namespace": ns, "key": fmt.Sprintf("ord-%d", i), "owner": "n8n exec 1"})
		e.call(t, "POST", "/v1/fail", map[string]any{"namespace": ns, "key": fmt.Sprintf("ord-%d", i), "token": r.JSON(t)["token"], "reason": "outcome_unknown"})
	}
	filter := url.Values{"namespace": {ns}, "key_prefix": {"ord-"}}.Encode()
	for _, role := range []access.Role{access.RoleRead, access.RoleDecide, access.RoleAdmin} {
		t.Run(string(role), func(t *testing.T) {
			want := access.Principal{Role: role}.Allows(access.BulkScope)
			api := e.callWith(t, http.MethodPost, "/v1/keys/resolve-bulk", map[string]any{"filter": map[string]any{"namespace": ns, "key_prefix": "ord-"},
				"resolution": "failed", "by": "ann", "note": "CRM incident", "dry_run": true}, map[string]string{"Authorization": "Bearer " + scopedTokens[role]})
			if got := api.Status == http.StatusOK; got != want || !got && api.Status != http.StatusForbidden {
				t.Fatalf("API as %s: %s, want allowed %v", role, api, want)
			}

			c := consoleClient(t)
			if resp, _ := uiDo(t, c, "POST", e.url+"/ui/signin", url.Values{"token": {scopedTokens[role]}}); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign in as %s: %d", role, resp.StatusCode)
			}
			_, page := uiDo(t, c, "GET", e.url+"/ui/bulk?"+filter, nil)
			m := csrfRE.FindStringSubmatch(page)
			if m == nil {
				t.Fatalf("no CSRF token on the bulk page")
			}
			if offered := strings.Contains(page, `id="bulk-form"`); offered != want {
				t.Errorf("console as %s offers the form: %v, want %v", role, offered, want)
			}
			resp, page := uiDo(t, c, "POST", e.url+"/ui/bulk", url.Values{"csrf": {m[1]}, "filter": {filter}, "action": {"retry"}, "note": {"CRM incident"}})
			if got := resp.StatusCode == http.StatusOK && strings.Contains(page, "Allow 3 events to be sent again?"); got != want || !got && resp.StatusCode != http.StatusForbidden {
				t.Fatalf("console as %s: %d, want allowed %v:\n%s", role, resp.StatusCode, want, page)
			}
		})
	}
	// No selection, by a person whose role spans every namespace: the
	// domain's refusal, shown on the page; nothing is decided.
	c := consoleClient(t)
	uiDo(t, c, "POST", e.url+"/ui/signin", url.Values{"token": {testToken}})
	_, page := uiDo(t, c, "GET", e.url+"/ui/bulk", nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the bulk page")
	}
	resp, page := uiDo(t, c, "POST", e.url+"/ui/bulk", url.Values{"csrf": {m[1]}, "filter": {""}, "action": {"retry"}, "note": {"everything"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "never takes every key") {
		t.Fatalf("no selection: %d\n%s", resp.StatusCode, page)
	}
	if st := e.call(t, "GET", "/v1/lookup?namespace="+ns+"&key=ord-0", nil).JSON(t)["state"]; st != "unknown" {
		t.Fatalf("a question decided ord-0: %v", st)
	}
}

// The console mounted by api.New offers and accepts a re-run only with
// Config.Reruns (n8n's API); the grant kicks the same worker as the API.
func TestConsoleRerunFollowsTheServersReruns(t *testing.T) {
	for _, withReruns := range []bool{true, false} {
		t.Run(fmt.Sprintf("reruns %v", withReruns), func(t *testing.T) {
			kick := &kicks{}
			var opts []envOption
			if withReruns {
				opts = append(opts, withAPI(api.Config{Reruns: kick}))
			}
			e := start(t, opts...)
			e.gatedKey(t, "ord-1", "n8n wf1 exec 42")
			c := consoleClient(t)
			if resp, _ := uiDo(t, c, "POST", e.url+"/ui/signin", url.Values{"token": {testToken}}); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign in: %d", resp.StatusCode)
			}
			_, page := uiDo(t, c, "GET", e.url+"/ui/key?"+url.Values{"namespace": {ns}, "key": {"ord-1"}}.Encode(), nil)
			m := csrfRE.FindStringSubmatch(page)
			if m == nil || strings.Contains(page, `id="rerun-choice"`) != withReruns {
				t.Fatalf("the re-run choice shown: %v, want %v\n%s", !withReruns, withReruns, page)
			}
			resp, _ := uiDo(t, c, "POST", e.url+"/ui/key/resolve", url.Values{"csrf": {m[1]}, "namespace": {ns}, "key": {"ord-1"},
				"action": {"rerun"}, "note": {"CRM back"}})
			_, last := e.keyState(t, ns, "ord-1")
			switch {
			case withReruns && (resp.StatusCode != http.StatusSeeOther || last["event"] != "rerun_granted" || kick.n.Load() != 1):
				t.Fatalf("re-run: %d, %v, kicks %d", resp.StatusCode, last, kick.n.Load())
			case !withReruns && (resp.StatusCode != http.StatusNotImplemented || last["event"] != "rerun_gate"):
				t.Fatalf("a re-run without n8n's API: %d, %v", resp.StatusCode, last)
			}
		})
	}
}
