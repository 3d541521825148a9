package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// Replicas on one PostgreSQL database, each with a data folder of its own
// (Kubernetes' emptyDir), agree on what a person or n8n sees from any of
// them: a console session opened on one is valid on the other, a sign-out
// on one holds on the other, and both send n8n the same resume secret,
// which `n8n setup` reads from the database too. A single guard moving to
// PostgreSQL keeps its data folder's secret; a replica whose folder holds
// another is told. Without N8N_GUARD_TOKENS a replica refuses to start.
func TestReplicasShareTheirSecretsThroughPostgres(t *testing.T) {
	u := pgtest.FreshSchema(t, pgtest.URL(t, "the shared-secrets test"))
	first := t.TempDir()
	// The single guard that was there before: its resume secret is in n8n's credential.
	if err := os.WriteFile(filepath.Join(first, ResumeSecretFile), []byte("secret-n8n-already-holds\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer // written by the replicas' goroutines while the test reads it
	var mains []*Main
	var bases []string
	for i, dir := range []string{first, t.TempDir(), t.TempDir()} {
		if i == 2 {
			if err := os.WriteFile(filepath.Join(dir, ResumeSecretFile), []byte("a-stray-copy\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: dir, Tokens: []string{"tok"}, Store: u},
			slog.New(slog.NewTextHandler(&logs, nil)))
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		mains, bases = append(mains, m), append(bases, "http://"+m.Addr())
	}

	for i, m := range mains {
		if m.resumeSecret != "secret-n8n-already-holds" {
			t.Errorf("replica %d resumes with %q, want the first guard's secret", i, m.resumeSecret)
		}
	}
	if !strings.Contains(logs.String(), "differs from the database's") {
		t.Errorf("the replica with a stray copy was not told:\n%s", logs.String())
	}
	for i, m := range mains {
		if m.checkSecret == "" || m.checkSecret != mains[0].checkSecret || m.checkSecret == m.resumeSecret {
			t.Errorf("replica %d checks with %q, want one check secret for every replica, not the resume secret", i, m.checkSecret)
		}
	}
	s, err := setupSecret(context.Background(), func(string) string { return "" }, t.TempDir(), u, resumeSecretSpec)
	if err != nil || s != "secret-n8n-already-holds" {
		t.Errorf("n8n setup reads %q, %v from the database", s, err)
	}

	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(bases[0]+"/ui/signin", url.Values{"token": {"tok"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Value != "" {
			cookie = ck
		}
	}
	if cookie == nil {
		t.Fatalf("no session cookie from the sign-in: %d %v", resp.StatusCode, resp.Header)
	}
	page := func(base string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+"/ui", nil)
		req.AddCookie(cookie)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, b := range bases {
		if code, _ := page(b); code != http.StatusOK {
			t.Fatalf("the session opened on replica 0 answers %d on replica %d, want 200", code, i)
		}
	}

	_, body := page(bases[1])
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", body)
	}
	req, _ := http.NewRequest(http.MethodPost, bases[1]+"/ui/signout", strings.NewReader(url.Values{"csrf": {m[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	if resp, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for i, b := range bases {
		if code, _ := page(b); code == http.StatusOK {
			t.Errorf("after the sign-out on replica 1, a copy of the cookie still works on replica %d", i)
		}
	}

	key, found, err := postgres.ReadSharedSecret(context.Background(), u, ConsoleKeyFile)
	if err != nil || !found || len(key) != 32 {
		t.Errorf("the console's session key in the database: %d bytes, found %v, %v", len(key), found, err)
	}

	noTokens := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Store: u}, nil)
	if err := noTokens.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "N8N_GUARD_TOKENS") {
		noTokens.Close()
		t.Errorf("a replica without N8N_GUARD_TOKENS started (err %v); each would make its own token", err)
	}
}
