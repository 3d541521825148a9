//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/notify"
)

// guard is the real n8n-guard binary, built from this checkout.
type guard struct {
	addr    string
	api     *client.Client
	bin     string
	args    []string
	env     []string
	logPath string
	cmd     *exec.Cmd
	logf    *os.File
	done    chan struct{}
}

// buildGuard compiles ./cmd/n8n-guard into dir.
func buildGuard(repo, dir string) (string, error) {
	bin := filepath.Join(dir, "n8n-guard")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/n8n-guard")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/n8n-guard: %v\n%s", err, out)
	}
	return bin, nil
}

func startGuard(bin, dir, config, token, slackURL string, env ...string) (*guard, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "guard.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return nil, err
	}
	g := &guard{addr: fmt.Sprintf("127.0.0.1:%d", port)}
	g.api = client.New(g.URL(), client.Options{Token: token, Timeout: time.Minute})
	g.args = []string{"serve", "--addr", g.addr, "--data", filepath.Join(dir, "guard-data"), "--config", cfg}
	g.bin, g.logPath = bin, filepath.Join(dir, "guard.log")
	g.env = append(os.Environ(),
		"N8N_GUARD_TOKENS="+token,
		"SLACK_BOT_TOKEN=xoxb-test",
		"SLACK_API_URL="+slackURL,
	)
	g.env = append(g.env, env...)
	return g, g.start()
}

// start runs the binary and waits until it is ready.
func (g *guard) start() error {
	var err error
	g.logf, err = os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	g.done = make(chan struct{})
	g.cmd = exec.Command(g.bin, g.args...)
	g.cmd.Env = g.env
	g.cmd.Stdout, g.cmd.Stderr = g.logf, g.logf
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		return err
	}
	go func() { g.cmd.Wait(); close(g.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		resp, err := http.Get(g.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-g.done:
			return fmt.Errorf("n8n-guard exited while starting; see %s", g.logPath)
		case <-ctx.Done():
			g.Stop()
			return fmt.Errorf("n8n-guard not ready after 30s; see %s", g.logPath)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (g *guard) URL() string { return "http://" + g.addr }

// Stop ends the guard; calling it again does nothing.
func (g *guard) Stop() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
	g.logf.Close()
}

// ResumeSecret is the secret of the guard's resume calls, which it wrote
// into its data folder on first start.
func (g *guard) ResumeSecret() (string, error) {
	b, err := os.ReadFile(filepath.Join(g.dataDir(), "resume-secret"))
	return strings.TrimSpace(string(b)), err
}

// CheckSecret is the secret of the guard's check calls, which it wrote
// into its data folder on first start.
func (g *guard) CheckSecret() (string, error) {
	b, err := os.ReadFile(filepath.Join(g.dataDir(), "check-secret"))
	return strings.TrimSpace(string(b)), err
}

func (g *guard) dataDir() string {
	for i, a := range g.args {
		if a == "--data" && i+1 < len(g.args) {
			return g.args[i+1]
		}
	}
	return ""
}

// record is the part of a key's record the tests look at.
type record struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	State     string `json:"state"`
	Attempt   int    `json:"attempt"`
	ResultRef string `json:"result_ref"`
	Reason    string `json:"reason"`
	Retryable bool   `json:"retryable"`
	Message   string `json:"message"`
	ResumeURL string `json:"resume_url"`
	History   []struct {
		Event  string `json:"event"`
		By     string `json:"by"`
		Detail string `json:"detail"`
	} `json:"history"`
}

// last is the event of the record's newest history entry.
func (r record) last() string {
	if len(r.History) == 0 {
		return ""
	}
	return r.History[len(r.History)-1].Event
}

// Lookup asks the guard for a key's record.
func (g *guard) Lookup(namespace, key string) (record, error) {
	var rec record
	raw, err := g.api.Lookup(context.Background(), namespace, key)
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(raw, &rec)
}

// Notifications lists the guard's outbox.
func (g *guard) Notifications() ([]notify.Notification, error) {
	page, err := g.api.Notifications(context.Background(), "", 100)
	return page.Items, err
}

// callJSON sends body (if any) as JSON with one auth header and decodes a
// 200 answer into out (if any); any other status is an error with the body.
// The tests read n8n's public API with it, on their own: setup's n8n
// client is what they check.
func callJSON(ctx context.Context, method, url, authHeader, auth string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set(authHeader, auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, tail(string(raw), 500))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
