package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// setup --create-credential finds the guard's resume secret the way the
// guard does: the environment first, then <data>/resume-secret; a data
// folder without one (a guard never started) is not an error here.
func TestSetupResumeSecret(t *testing.T) {
	dir := t.TempDir()
	noEnv := func(string) string { return "" }
	if s, err := setupResumeSecret(context.Background(), noEnv, dir, ""); err != nil || s != "" {
		t.Fatalf("no secret yet: %q, %v; want none and no error", s, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ResumeSecretFile), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := setupResumeSecret(context.Background(), noEnv, dir, ""); err != nil || s != "from-file" {
		t.Fatalf("from the data folder: %q, %v", s, err)
	}
	env := func(k string) string {
		if k == "N8N_GUARD_RESUME_SECRET" {
			return "from-env"
		}
		return ""
	}
	if s, err := setupResumeSecret(context.Background(), env, dir, ""); err != nil || s != "from-env" {
		t.Fatalf("N8N_GUARD_RESUME_SECRET: %q, %v, want it to win", s, err)
	}
	// The guard itself reads the same file.
	if s, err := resumeSecret("", dir); err != nil || s != "from-file" {
		t.Fatalf("the guard reads %q, %v from the same file", s, err)
	}
}
