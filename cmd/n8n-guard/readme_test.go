package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's walkthrough runs as printed: its sh blocks, in order, in
// one bash with errexit, in a fresh folder beside `n8n-guard serve` (this
// test binary, started as README's first command starts it). Three
// changes only, each of which must find its text (a README that drifts
// from them fails here): the guard listens on a free port instead of
// 8080, the CLI is this test binary instead of a `go build` of it, and
// N8N_GUARD_URL names that port for the CLI. Each step's answer is the
// one the README shows.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: the README walkthrough needs %s (install it to run this test): %v", tool, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script := walkthroughScript(t, string(raw))

	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// n8n-guard: this test binary running main (TestMain).
	cli := filepath.Join(t.TempDir(), "n8n-guard")
	if err := os.WriteFile(cli, []byte(fmt.Sprintf("#!/bin/sh\n%s=1 exec '%s' \"$@\"\n", checkChildEnv, exe)), 0o755); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	for _, sub := range []struct{ from, to string }{
		{"localhost:8080", addr},
		{"go build -o n8n-guard ./cmd/n8n-guard", "cp '" + cli + "' n8n-guard"},
	} {
		if !strings.Contains(script, sub.from) {
			t.Fatalf("the walkthrough no longer has %q, which this test replaces:\n%s", sub.from, script)
		}
		script = strings.ReplaceAll(script, sub.from, sub.to)
	}

	// README's first command, `go run ./cmd/n8n-guard serve`, in dir.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve := exec.CommandContext(ctx, cli, "serve", "--addr", addr)
	serve.Dir = dir
	var serveLog bytes.Buffer
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	serve.Env = cleanEnv()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	defer func() { cancel(); <-done }()
	waitReady(t, "http://"+addr, done)

	sh := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	sh.Dir = dir
	sh.Env = append(cleanEnv(), "N8N_GUARD_URL=http://"+addr)
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n--- script\n%s\n--- output\n%s\n--- serve\n%s", err, script, out, serveLog.String())
	}
	// Each step's answer, in the README's order.
	text := string(out)
	at := 0
	for _, want := range []string{
		`"outcome":"accepted"`, `"outcome":"in_progress"`, `"outcome":"completed"`,
		"Idempotent-Replayed: true", `"outcome":"duplicate_event"`,
		`"outcome":"state_unknown"`, "HOLDER", "evt_9", "n8n exec 4712", "completed",
	} {
		i := strings.Index(text[at:], want)
		if i < 0 {
			t.Fatalf("the walkthrough's output lacks %s after byte %d:\n%s", want, at, text)
		}
		at += i + len(want)
	}
	if regexp.MustCompile(`"status":\s*4\d\d`).MatchString(text) {
		t.Fatalf("a step of the walkthrough was refused:\n%s", text)
	}
}

// walkthroughScript is the sh blocks of README's walkthrough section,
// joined in order.
func walkthroughScript(t *testing.T, readme string) string {
	t.Helper()
	start := strings.Index(readme, "\n## A 5-minute walkthrough")
	if start < 0 {
		t.Fatal("README has no walkthrough section")
	}
	section := readme[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) < 5 {
		t.Fatalf("the walkthrough has %d sh blocks", len(blocks))
	}
	return strings.Join(blocks, "\n")
}

// cleanEnv is this process's environment without the guard's own
// variables, so the walkthrough sees what a newcomer's shell has.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "N8N_") && !strings.HasPrefix(kv, "SLACK_") {
			out = append(out, kv)
		}
	}
	return out
}

// README's test command and .ci/run's give go test the same time limit:
// the heavy suites outlast go test's default 10 minutes on a busy 2-core
// machine, and a newcomer's run must not end where CI's goes on.
func TestReadmeTestCommandHasCIsTimeout(t *testing.T) {
	limit := func(file, pattern string) string {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join("..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(pattern).FindSubmatch(raw)
		if m == nil {
			t.Fatalf("%s has no %s", file, pattern)
		}
		return string(m[1])
	}
	readme := limit("README.md", `(?m)^go test -timeout (\S+) \./\.\.\.`)
	ci := limit(".ci/run", `(?m)^go test -race -count=1 -timeout (\S+) \./\.\.\.`)
	if readme != ci {
		t.Fatalf("README's go test has -timeout %s, .ci/run's %s", readme, ci)
	}
}
