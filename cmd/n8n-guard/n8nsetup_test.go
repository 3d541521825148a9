package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// setup --create-credential finds each of the guard's secrets the way the
// guard does: the environment first, then its file in the data folder; a
// data folder without one (a guard never started) is not an error here.
// The resume and check secrets are two: each credential gets its own.
func TestSetupFindsTheGuardsSecrets(t *testing.T) {
	for _, tc := range []struct {
		purpose, env, file string
		spec               sharedSecret
		guard              func(string) (string, error)
	}{
		{"resume", "N8N_GUARD_RESUME_SECRET", ResumeSecretFile, resumeSecretSpec, func(dir string) (string, error) { return resumeSecret("", dir) }},
		{"check", "N8N_GUARD_CHECK_SECRET", n8n.CheckSecretFile, checkSecretSpec, func(dir string) (string, error) { return checkSecret("", dir) }},
	} {
		t.Run(tc.purpose, func(t *testing.T) {
			dir := t.TempDir()
			noEnv := func(string) string { return "" }
			if s, err := setupSecret(context.Background(), noEnv, dir, "", tc.spec); err != nil || s != "" {
				t.Fatalf("no secret yet: %q, %v; want none and no error", s, err)
			}
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte("from-file\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if s, err := setupSecret(context.Background(), noEnv, dir, "", tc.spec); err != nil || s != "from-file" {
				t.Fatalf("from the data folder: %q, %v", s, err)
			}
			env := func(k string) string {
				if k == tc.env {
					return "from-env"
				}
				return ""
			}
			if s, err := setupSecret(context.Background(), env, dir, "", tc.spec); err != nil || s != "from-env" {
				t.Fatalf("%s: %q, %v, want it to win", tc.env, s, err)
			}
			// The guard itself reads the same file.
			if s, err := tc.guard(dir); err != nil || s != "from-file" {
				t.Fatalf("the guard reads %q, %v from the same file", s, err)
			}
		})
	}
	dir := t.TempDir()
	resume, _ := resumeSecret("", dir)
	check, _ := checkSecret("", dir)
	if resume == "" || check == "" || resume == check {
		t.Fatalf("a new guard's resume and check secrets: %q and %q, want two different ones", resume, check)
	}
}

// setup and check say where the guard accepts resume URLs, and warn when
// the ones n8n builds (from its WEBHOOK_URL) are not among them.
func TestSetupAndCheckKnowTheResumeOrigin(t *testing.T) {
	targets := func(origins ...string) keystore.ResumeTargets {
		tg, err := keystore.NewResumeTargets(origins, "")
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	for _, tc := range []struct {
		name    string
		targets keystore.ResumeTargets
		webhook string
		warn    bool
		want    string
	}{
		{"none configured", targets(), "http://localhost:5678", true, "N8N_GUARD_RESUME_ORIGINS=http://localhost:5678"},
		{"n8n's own origin", targets("http://localhost:5678"), "http://localhost:5678/", false, "accepts n8n's resume URLs: http://localhost:5678 at /webhook-waiting/"},
		{"another host", targets("http://n8n:5678"), "https://n8n.example.org", true, "which the guard does not accept (it accepts http://n8n:5678"},
		{"another port", targets("http://localhost:5678"), "http://localhost:5679", true, "N8N_GUARD_RESUME_ORIGINS=http://localhost:5679"},
		{"behind a path", targets("https://example.org/n8n"), "https://example.org/n8n/", false, "accepts n8n's resume URLs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, warn := resumeOrigin(tc.targets, tc.webhook)
			if warn != tc.warn || !strings.Contains(text, tc.want) {
				t.Fatalf("%q (warn %v), want warn %v and %q", text, warn, tc.warn, tc.want)
			}
		})
	}
	// The origins are found as serve finds them.
	f := &n8nFlags{n8nURL: "http://localhost:5678"}
	tg, err := f.resumeTargets(func(k string) string {
		if k == "N8N_GUARD_RESUME_ORIGINS" {
			return "https://n8n.example.org"
		}
		return ""
	})
	if err != nil || strings.Join(tg.Origins(), ",") != "https://n8n.example.org:443" && strings.Join(tg.Origins(), ",") != "https://n8n.example.org" {
		t.Fatalf("N8N_GUARD_RESUME_ORIGINS: %v %v", tg.Origins(), err)
	}
	if tg, err = f.resumeTargets(func(string) string { return "" }); err != nil || !tg.Configured() || tg.Refuses("http://localhost:5678/webhook-waiting/1") != "" {
		t.Fatalf("N8N_URL's origin: %v %v", tg.Origins(), err)
	}
}
