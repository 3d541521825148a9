//go:build !windows

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The upgrade path of docs/deploy.md: the previous release writes a data
// folder (keys in each state, a notification in the outbox, its generated
// token), stops on SIGTERM, and this build serves the same folder. The
// previous release is built from git: N8N_GUARD_UPGRADE_FROM names its
// commit or tag (.ci/run sets it; without it the test is skipped).
func TestUpgradeFromPreviousRelease(t *testing.T) {
	from := os.Getenv("N8N_GUARD_UPGRADE_FROM")
	if from == "" {
		// go test shows a skip's line only with -v: the README says how to
		// list them, and stderr says it on a single package's run.
		msg := "SKIP: the upgrade from the previous release was not tested: set N8N_GUARD_UPGRADE_FROM to its commit or tag (.ci/run: N8N_GUARD_UPGRADE_FROM=80b8eef)"
		fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
		t.Skip(msg)
	}
	repo, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("not in a git checkout: %v", err)
	}
	work := t.TempDir()
	src := filepath.Join(work, "src")
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = strings.TrimSpace(string(repo))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gitRun("worktree", "add", "--detach", src, from)
	t.Cleanup(func() { gitRun("worktree", "remove", "--force", src) })
	oldBin := filepath.Join(work, "n8n-guard-old")
	build := exec.Command("go", "build", "-o", oldBin, "./cmd/n8n-guard")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", from, err, out)
	}

	data := filepath.Join(work, "data")
	addr := freeAddr(t)
	base := "http://" + addr
	logf, _ := os.Create(filepath.Join(work, "old.log"))
	defer logf.Close()
	old := exec.Command(oldBin, "serve", "--addr", addr, "--data", data)
	old.Stdout, old.Stderr = logf, logf
	old.Env = os.Environ() // no N8N_GUARD_TOKENS: it generates <data>/api-token
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- old.Wait() }()
	waitReady(t, base, done)
	token, err := readToken(filepath.Join(data, TokenFile))
	if err != nil {
		t.Fatal(err)
	}

	_, a := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt-done"})
	call(t, base, token, http.MethodPost, "/v1/complete", map[string]any{"namespace": "crm-contacts", "key": "evt-done", "token": a["token"], "result_ref": "crm-1"})
	_, b := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt-unknown", "destination": "crm"})
	call(t, base, token, http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": "evt-unknown", "token": b["token"], "reason": "outcome_unknown"})
	_, c := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt-held", "lease_seconds": 3600})
	if status, _ := call(t, base, token, http.MethodPost, "/v1/n8n/error", map[string]any{
		"execution": map[string]any{"id": "77", "error": map[string]any{"message": "CRM said 400"}},
		"workflow":  map[string]any{"id": "w1", "name": "lead to crm"}}); status != http.StatusAccepted && status != http.StatusOK {
		t.Fatalf("n8n error report to the old release: HTTP %d", status)
	}
	if err := old.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the old release did not stop cleanly: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the old release did not stop after SIGTERM")
	}

	// This build on the same folder, with the token the old one generated.
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("this build on %s's data folder: %v", from, err)
	}
	defer m.Close()
	base = "http://" + m.Addr()
	for _, tc := range []struct {
		key, want string
		check     func(map[string]any) error
	}{
		{"evt-done", "duplicate_event", func(r map[string]any) error {
			if r["result_ref"] != "crm-1" {
				return fmt.Errorf("result_ref %v", r["result_ref"])
			}
			return nil
		}},
		{"evt-unknown", "state_unknown", nil},
		{"evt-held", "in_progress", nil},
	} {
		_, r := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": tc.key})
		if r["outcome"] != tc.want {
			t.Errorf("%s after the upgrade: %v, want %s", tc.key, r, tc.want)
		} else if tc.check != nil {
			if err := tc.check(r); err != nil {
				t.Errorf("%s after the upgrade: %v", tc.key, err)
			}
		}
	}
	// The holder of the lease taken before the upgrade can still complete.
	if _, r := call(t, base, token, http.MethodPost, "/v1/complete", map[string]any{"namespace": "crm-contacts", "key": "evt-held", "token": c["token"], "result_ref": "crm-2"}); r["outcome"] != "completed" {
		t.Errorf("completing a lease taken before the upgrade: %v", r)
	}
	_, n := call(t, base, token, http.MethodGet, "/v1/notifications", nil)
	if items, _ := n["items"].([]any); len(items) == 0 {
		t.Errorf("the outbox entry written before the upgrade is gone: %v", n)
	}
	// The breaker the old release counted one failure on (evt-unknown's)
	// reads back with it, and counts on from it: a second key that finds
	// crm unreachable opens it (two distinct keys).
	crm := func() map[string]any {
		_, d := call(t, base, token, http.MethodGet, "/v1/destinations", nil)
		items, _ := d["items"].([]any)
		for _, it := range items {
			if b, _ := it.(map[string]any); b["destination"] == "crm" {
				return b
			}
		}
		t.Fatalf("no breaker of crm after the upgrade: %v", d)
		return nil
	}
	if b := crm(); b["state"] != "closed" || b["consecutive_failures"] != 1.0 {
		t.Errorf("crm's breaker after the upgrade: %v, want closed with the one failure counted before", b)
	}
	_, e := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt-new", "destination": "crm"})
	call(t, base, token, http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": "evt-new", "token": e["token"], "reason": "destination_unreachable"})
	if b := crm(); b["state"] != "open" || b["consecutive_failures"] != 2.0 {
		t.Errorf("crm's breaker after a second key found it unreachable: %v, want open with 2", b)
	}
}
