//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// n8nVersion is the n8n the workflows are proven against. 1.113.3 installs
// on Node 20 and its CLI import + activation works (1.122–1.123 break
// activation after a CLI import; 2.x needs Node 24).
const n8nVersion = "1.113.3"

// n8nInstallDir is where the pinned n8n lives, outside git and reused
// between runs.
func n8nInstallDir() (string, error) {
	if d := os.Getenv("N8N_GUARD_N8N_DIR"); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "n8n-guard", "n8n-"+n8nVersion), nil
}

// ensureN8N installs the pinned n8n unless a finished install of it is
// there, and returns the path of its CLI.
func ensureN8N(t *testing.T) string {
	t.Helper()
	dir, err := n8nInstallDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "n8n")
	marker := filepath.Join(dir, ".n8n-guard-installed")
	if b, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(b)) == n8nVersion {
		if installedVersion(dir) == n8nVersion {
			return bin
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// One install at a time, also across test processes.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(b)) == n8nVersion && installedVersion(dir) == n8nVersion {
		return bin
	}
	// xlsx is overridden: n8n asks for it from a host these machines cannot reach.
	pkg := fmt.Sprintf(`{"private": true, "dependencies": {"n8n": %q}, "overrides": {"xlsx": "0.18.5"}}`+"\n", n8nVersion)
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("installing n8n %s into %s (about 4 minutes, once)", n8nVersion, dir)
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund")
	cmd.Dir = dir
	// sqlite3 builds from source against the system's Node headers.
	cmd.Env = append(os.Environ(), "npm_config_nodedir=/usr")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install n8n@%s: %v\n%s", n8nVersion, err, tail(string(out), 4000))
	}
	if v := installedVersion(dir); v != n8nVersion {
		t.Fatalf("after npm install, n8n is %q, want %s", v, n8nVersion)
	}
	if err := os.WriteFile(marker, []byte(n8nVersion+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin
}

func installedVersion(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "n8n", "package.json"))
	if err != nil {
		return ""
	}
	var p struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}

// n8nInstance is one headless n8n with its own user folder and database.
type n8nInstance struct {
	bin    string
	folder string
	port   int
	env    []string
	logf   *os.File
	cmd    *exec.Cmd
	done   chan struct{}
}

func newN8N(bin, folder string, extraEnv map[string]string) (*n8nInstance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	brokerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return nil, err
	}
	env := map[string]string{
		"N8N_USER_FOLDER":                       folder,
		"N8N_PORT":                              fmt.Sprint(port),
		"N8N_LISTEN_ADDRESS":                    "127.0.0.1",
		"N8N_DIAGNOSTICS_ENABLED":               "false",
		"N8N_VERSION_NOTIFICATIONS_ENABLED":     "false",
		"N8N_TEMPLATES_ENABLED":                 "false",
		"N8N_PERSONALIZATION_ENABLED":           "false",
		"N8N_RUNNERS_ENABLED":                   "true",
		"N8N_RUNNERS_BROKER_PORT":               fmt.Sprint(brokerPort),
		"N8N_SECURE_COOKIE":                     "false",
		"DB_SQLITE_POOL_SIZE":                   "2",
		"N8N_BLOCK_ENV_ACCESS_IN_NODE":          "false",
		"N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS": "false",
		"N8N_ENCRYPTION_KEY":                    "n8n-guard-e2e-not-a-secret",
		"WEBHOOK_URL":                           fmt.Sprintf("http://127.0.0.1:%d/", port),
	}
	for k, v := range extraEnv {
		env[k] = v
	}
	n := &n8nInstance{bin: bin, folder: folder, port: port}
	n.env = os.Environ()
	for k, v := range env {
		n.env = append(n.env, k+"="+v)
	}
	n.logf, err = os.Create(filepath.Join(folder, "n8n.log"))
	if err != nil {
		return nil, err
	}
	return n, nil
}

// CLI runs one n8n CLI command against the instance's database.
func (n *n8nInstance) CLI(args ...string) error {
	cmd := exec.Command(n.bin, args...)
	cmd.Env = n.env
	cmd.Dir = n.folder
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(n.logf, "$ n8n %s\n%s\n", strings.Join(args, " "), out)
	if err != nil {
		return fmt.Errorf("n8n %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 3000))
	}
	return nil
}

// Start runs `n8n start` in its own process group (it spawns a task runner).
func (n *n8nInstance) Start() error {
	n.cmd = exec.Command(n.bin, "start")
	n.cmd.Env = n.env
	n.cmd.Dir = n.folder
	n.cmd.Stdout, n.cmd.Stderr = n.logf, n.logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return err
	}
	n.done = make(chan struct{})
	go func() { n.cmd.Wait(); close(n.done) }()
	return nil
}

func (n *n8nInstance) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", n.port) }

// WaitForWebhook polls a production POST webhook until n8n has registered
// it. /healthz answers before workflows are activated; a GET (which starts
// no execution) answers 404 either way, but names the POST once the path is
// registered.
func (n *n8nInstance) WaitForWebhook(ctx context.Context, path string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/webhook/"+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "make a POST request") {
				return nil
			}
		}
		select {
		case <-n.done:
			return errors.New("n8n exited while starting; see " + n.logf.Name())
		case <-ctx.Done():
			return fmt.Errorf("webhook %s not registered: %w; see %s", path, ctx.Err(), n.logf.Name())
		case <-time.After(time.Second):
		}
	}
}

// Stop ends n8n and its task runner.
func (n *n8nInstance) Stop() {
	if n.cmd != nil && n.cmd.Process != nil {
		pgid := n.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-n.done
		}
	}
	n.logf.Close()
}
