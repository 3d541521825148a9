package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/openid/openidtest"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
)

func TestConsoleConfig(t *testing.T) {
	const yml = `
console:
  oidc:
    issuer: https://accounts.google.com
    client_id: guard.apps.googleusercontent.com
    client_secret_env: OIDC_SECRET
    redirect_url: https://guard.example.com/ui/signin/oidc/callback
    provider_name: Google
  people:
    - person: ana@example.com
      role: admin
    - group: oncall
      role: decide
      namespaces: [crm]
    - group: everyone
      role: read
`
	fc, err := ParseFile(strings.NewReader(yml))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := fc.ConsoleSignIn(env(map[string]string{"OIDC_SECRET": "s3cret"}), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if cc.OpenID == nil || cc.ProviderName != "Google" || cc.NoTokenSignIn || len(cc.People) != 3 {
		t.Fatalf("console config %+v", cc)
	}
	for _, tc := range []struct {
		name   string
		groups []string
		role   access.Role
		ns     []string
	}{
		{"Ana@Example.com", []string{"oncall"}, access.RoleAdmin, nil}, // the first rule that names her
		{"bo@example.com", []string{"everyone", "oncall"}, access.RoleDecide, []string{"crm"}},
		{"cy@example.com", []string{"everyone"}, access.RoleRead, nil},
	} {
		p, ok := cc.People.Principal(tc.name, tc.groups)
		if !ok || p.Role != tc.role || len(p.Namespaces) != len(tc.ns) || !p.Person || p.Identity() != "person:"+tc.name {
			t.Errorf("%s %v: %+v %v, want %s %v", tc.name, tc.groups, p, ok, tc.role, tc.ns)
		}
	}
	if _, ok := cc.People.Principal("dan@example.com", []string{"contractors"}); ok {
		t.Error("a person no rule names has a role")
	}
	if _, err := fc.ConsoleSignIn(env(nil), os.ReadFile); err == nil || !strings.Contains(err.Error(), "OIDC_SECRET is not set") {
		t.Fatalf("unset secret: %v", err)
	}
	oidc := "console:\n  oidc:\n    issuer: https://idp.example.com\n    client_id: c\n    client_secret_env: S\n    redirect_url: https://g.example.com/ui/signin/oidc/callback\n"
	for name, bad := range map[string]string{
		"no people":              oidc,
		"a reserve person":       oidc + "  people:\n    - person: a@example.com\n      role: reserve\n",
		"person and group":       oidc + "  people:\n    - person: a@example.com\n      group: g\n      role: read\n",
		"bad namespace":          oidc + "  people:\n    - group: g\n      role: read\n      namespaces: [Not Valid]\n",
		"people without oidc":    "console:\n  people:\n    - person: a@example.com\n      role: read\n",
		"no sign-in at all":      "console:\n  shared_token_sign_in: false\n",
		"two secret sources":     strings.Replace(oidc, "client_secret_env: S", "client_secret_env: S\n    client_secret_file: /run/s", 1) + "  people:\n    - group: g\n      role: read\n",
		"redirect elsewhere":     strings.Replace(oidc, "/ui/signin/oidc/callback", "/callback", 1) + "  people:\n    - group: g\n      role: read\n",
		"issuer not a URL":       strings.Replace(oidc, "https://idp.example.com", "idp", 1) + "  people:\n    - group: g\n      role: read\n",
		"a misspelled key":       strings.Replace(oidc, "client_id", "clientid", 1),
		"secret written in file": strings.Replace(oidc, "client_secret_env: S", "client_secret: plain", 1),
	} {
		if _, err := ParseFile(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// The key that seals session cookies is made once, kept 0600 in the data
// folder and read again at the next start.
func TestConsoleSessionKeyIsKept(t *testing.T) {
	data := t.TempDir()
	a, err := consoleSessionKey(data, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	b, err := consoleSessionKey(data, slog.New(slog.DiscardHandler))
	if err != nil || string(a) != string(b) {
		t.Fatalf("the second start has another key (%v)", err)
	}
	if fi, err := os.Stat(filepath.Join(data, ConsoleKeyFile)); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
		t.Fatalf("key file: %v %v", fi, err)
	}
	os.WriteFile(filepath.Join(data, ConsoleKeyFile), []byte("short"), 0o600)
	if _, err := consoleSessionKey(data, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("a damaged key file: %v", err)
	}
}

// The whole wiring: a guard started from a configuration with
// console.oidc signs a person in through the provider, their decision
// names them, the session works again after a restart on the same data
// folder, and the client secret is never logged.
// Mutation tried: main not passing the data folder's key (con.SessionKey
// left nil): the session is gone after the restart.
func TestConsoleNamedSignInThroughMain(t *testing.T) {
	const secret = "oidc-client-secret-0123456789"
	is := openidtest.New("guard-console", secret)
	defer is.Close()
	is.SignIn(openidtest.Person{Email: "ana@example.com", Groups: []string{"oncall"}})
	addr := freeAddr(t)
	base := "http://" + addr
	yml := "console:\n  oidc:\n    issuer: " + is.URL + "\n    client_id: guard-console\n    client_secret_env: OIDC_SECRET\n" +
		"    redirect_url: " + base + "/ui/signin/oidc/callback\n  people:\n    - group: oncall\n      role: decide\n"
	fc, err := ParseFile(strings.NewReader(yml))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := fc.ConsoleSignIn(env(map[string]string{"OIDC_SECRET": secret}), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	logs := &logbuf.Buffer{}
	start := func() *Main {
		m := NewMain(Config{Addr: addr, DataDir: data, Tokens: []string{"admin-token"}, File: fc, Console: cc},
			slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := start()
	defer func() { m.Close() }()
	status, r := call(t, base, "admin-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "c-1"})
	if status != 200 {
		t.Fatalf("reserve: %d %v", status, r)
	}
	if status, f := call(t, base, "admin-token", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm", "key": "c-1", "token": r["token"], "reason": "outcome_unknown"}); status != 200 {
		t.Fatalf("fail: %d %v", status, f)
	}

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := get(base + "/ui/signin/oidc")
	resp, _ = get(resp.Header.Get("Location"))
	resp, page := get(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Signed in as <strong>ana@example.com") {
		t.Fatalf("sign in: %d\n%s", resp.StatusCode, page)
	}

	m.Close()
	m = start()
	_, page = get(base + "/ui/key?namespace=crm&key=c-1")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil || !strings.Contains(page, `id="resolve-form"`) {
		t.Fatalf("after the restart, the key page is not the signed-in person's:\n%.800s", page)
	}
	form := url.Values{"csrf": {csrf[1]}, "namespace": {"crm"}, "key": {"c-1"}, "action": {"retry"}, "note": {"checked"}}
	resp, err = c.PostForm(base+"/ui/key/resolve", form)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resolve: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	status, l := call(t, base, "admin-token", http.MethodGet, "/v1/keys/crm/c-1", nil)
	if status != 200 || l["resolved_by"] != "ana@example.com (console, OIDC)" {
		t.Fatalf("lookup: %d %v", status, l)
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatal("the client secret is in the log")
	}
}
