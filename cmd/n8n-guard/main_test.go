package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// call sends a JSON request with a bearer token and decodes the answer.
func call(t *testing.T, base, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, m
}

func waitReady(t *testing.T, base string, done <-chan error) {
	t.Helper()
	if !testwait.Poll(10*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve ended while starting: %v", err)
		default:
		}
		res, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}) {
		t.Fatalf("%s not ready after 10s", base)
	}
}

// The binary's life in one process: serve generates a token, answers,
// stops cleanly on SIGTERM; a restart on the same data folder finds the
// token and the keys where they were.
func TestServeSIGTERMAndRestart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	base := "http://" + addr
	logs := &logbuf.Buffer{}
	vars := map[string]string{"N8N_GUARD_ADDR": addr, "N8N_GUARD_DATA": data}

	cmd := newRootCmd(env(vars), io.Discard, logs)
	cmd.SetArgs([]string{"serve", "--log-level", "debug"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(context.Background()) }()
	waitReady(t, base, done)

	tokenPath := filepath.Join(data, TokenFile)
	fi, err := os.Stat(tokenPath)
	if err != nil {
		t.Fatalf("no generated token: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	token, err := readToken(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), token) {
		t.Fatalf("the token was logged")
	}
	if !strings.Contains(logs.String(), tokenPath) {
		t.Fatalf("the log does not say where the token is:\n%s", logs)
	}

	status, a := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "bookings", "key": "B-1042"})
	if status != 200 || a["outcome"] != "accepted" {
		t.Fatalf("reserve: %d %v", status, a)
	}
	status, c := call(t, base, token, http.MethodPost, "/v1/complete", map[string]any{"namespace": "bookings", "key": "B-1042", "token": a["token"], "result_ref": "mail-1"})
	if status != 200 || c["outcome"] != "completed" {
		t.Fatalf("complete: %d %v", status, c)
	}
	if !strings.Contains(logs.String(), `msg=request`) {
		t.Fatalf("no debug line per request:\n%s", logs)
	}

	sigterm(t) // signal_unix_test.go
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", err, logs)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not stop after SIGTERM:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "stopped") {
		t.Fatalf("no clean stop in the log:\n%s", logs)
	}

	// Restart on the same data, through Main as the e2e tests do.
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base = "http://" + m.Addr()
	status, d := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "bookings", "key": "B-1042"})
	if status != 200 || d["outcome"] != "duplicate_event" || d["result_ref"] != "mail-1" {
		t.Fatalf("after restart: %d %v", status, d)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestMainRunFailsClearly(t *testing.T) {
	t.Run("second server on the same data folder", func(t *testing.T) {
		data := t.TempDir()
		m1 := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{"t"}}, nil)
		if err := m1.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer m1.Close()
		m2 := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{"t"}}, nil)
		err := m2.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "locked") {
			t.Fatalf("want a locked-file error, got %v", err)
		}
	})
	t.Run("address in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		m := NewMain(Config{Addr: ln.Addr().String(), DataDir: t.TempDir(), Tokens: []string{"t"}}, nil)
		if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "listen") {
			t.Fatalf("want a listen error, got %v", err)
		}
		m.Close()
	})
}

// The operator commands against a running server.
func TestOperatorCommands(t *testing.T) {
	data := t.TempDir()
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{"op-token"}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	for _, key := range []string{"B-1", "B-2"} {
		_, a := call(t, base, "op-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "bookings", "key": key, "owner": "exec 9"})
		call(t, base, "op-token", http.MethodPost, "/v1/fail", map[string]any{"namespace": "bookings", "key": key, "token": a["token"], "reason": "outcome_unknown"})
	}
	vars := map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_TOKEN": "op-token"}
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		cmd := newRootCmd(env(vars), &out, &errb)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errb.String(), err
	}

	out, err := run("keys", "list", "--state", "unknown")
	if err != nil || !strings.Contains(out, "B-1") || !strings.Contains(out, "B-2") || !strings.Contains(out, "unknown") {
		t.Fatalf("keys list: %v\n%s", err, out)
	}
	// The column says holder, as the console does, and shows the holder.
	if header, _, _ := strings.Cut(out, "\n"); !strings.Contains(header, "HOLDER") || strings.Contains(header, "OWNER") || !strings.Contains(out, "exec 9") {
		t.Fatalf("keys list: want a HOLDER column showing exec 9 (the console's word), got\n%s", out)
	}
	out, err = run("keys", "list", "--state", "unknown", "--limit", "1", "--all", "--json")
	if err != nil || strings.Count(out, `"key": "B-`) != 2 {
		t.Fatalf("keys list --all --json: %v\n%s", err, out)
	}
	out, err = run("keys", "show", "bookings", "B-1")
	if err != nil || !strings.Contains(out, `"state": "unknown"`) || !strings.Contains(out, `"history"`) {
		t.Fatalf("keys show: %v\n%s", err, out)
	}
	out, err = run("keys", "resolve", "bookings", "B-1", "--completed", "--by", "office manager", "--note", "mail went out")
	if err != nil || !strings.Contains(out, "completed") {
		t.Fatalf("keys resolve --completed: %v\n%s", err, out)
	}
	out, err = run("keys", "resolve", "bookings", "B-2", "--failed", "--by", "office manager", "--note", "no mail")
	if err != nil || !strings.Contains(out, "may try again") {
		t.Fatalf("keys resolve --failed: %v\n%s", err, out)
	}
	if _, err = run("keys", "resolve", "bookings", "B-2", "--completed", "--failed", "--by", "x", "--note", "y"); err == nil {
		t.Fatalf("--completed with --failed must be refused")
	}
	if _, err = run("keys", "resolve", "bookings", "B-2", "--by", "x", "--note", "y"); err == nil {
		t.Fatalf("resolve without a decision must be refused")
	}
	out, err = run("keys", "show", "bookings", "nobody@example.com")
	if err == nil || !strings.Contains(err.Error(), "invalid_key") {
		t.Fatalf("a problem must be shown as an error: %v\n%s", err, out)
	}
	out, err = run("keys", "list", "--state", "unknown")
	if err != nil || strings.Contains(out, "B-") {
		t.Fatalf("queue not empty after resolving: %v\n%s", err, out)
	}
	out, err = run("version")
	if err != nil || !strings.Contains(out, "client") || !strings.Contains(out, "server") {
		t.Fatalf("version: %v\n%s", err, out)
	}

	t.Run("token from the data folder", func(t *testing.T) {
		os.WriteFile(filepath.Join(data, TokenFile), []byte("op-token\n"), 0o600)
		vars := map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_DATA": data}
		cmd := newRootCmd(env(vars), io.Discard, io.Discard)
		cmd.SetArgs([]string{"keys", "list"})
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		vars := map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_TOKEN": "nope"}
		cmd := newRootCmd(env(vars), io.Discard, io.Discard)
		cmd.SetArgs([]string{"keys", "list"})
		if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "unauthorized") {
			t.Fatalf("want unauthorized, got %v", err)
		}
	})
}

func TestServeFlagsAndEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"bad duration in the environment", map[string]string{"N8N_GUARD_READ_TIMEOUT": "soon"}, nil, "N8N_GUARD_READ_TIMEOUT"},
		{"bad body limit", map[string]string{"N8N_GUARD_BODY_LIMIT": "64KiB"}, nil, "N8N_GUARD_BODY_LIMIT"},
		{"bad log level", nil, []string{"--log-level", "loud"}, "log level"},
		{"missing config file", nil, []string{"--config", "/nonexistent/guard.yaml"}, "config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newRootCmd(env(tc.vars), io.Discard, io.Discard)
			cmd.SetArgs(append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, tc.args...))
			err := cmd.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error about %s, got %v", tc.want, err)
			}
		})
	}
	t.Run("invalid config file stops the start", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "guard.yaml")
		os.WriteFile(cfg, []byte("namespaces:\n  bookings:\n    lease: 120\n"), 0o644)
		cmd := newRootCmd(env(map[string]string{"N8N_GUARD_CONFIG": cfg}), io.Discard, io.Discard)
		cmd.SetArgs([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"})
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), "not a duration") {
			t.Fatalf("got %v", err)
		}
	})
}

func Example_splitTokens() {
	fmt.Println(splitTokens(" a, b,,c "))
	// Output: [a b c]
}
