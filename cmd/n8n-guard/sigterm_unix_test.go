//go:build !windows

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// SigtermRunsEnv sets how many times TestBinarySIGTERMUnderLoad stops the
// binary; the proof run uses 50 or more.
const SigtermRunsEnv = "N8N_GUARD_SIGTERM_RUNS"

const defaultSigtermRuns = 8

// A deploy stops the real binary with SIGTERM while workflows are calling
// it, again and again, on CPUs that are kept busy (a loaded machine is
// what opened fasthttp's shutdown race, valyala/fasthttp#1815: a panic
// in serveConn and exit status 2). Every stop must exit 0, and every key
// the server answered accepted or completed must be there after the
// restart.
func TestBinarySIGTERMUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and stops the binary many times")
	}
	runs := defaultSigtermRuns
	if v := os.Getenv(SigtermRunsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", SigtermRunsEnv, v)
		}
		runs = n
	}
	bin := filepath.Join(t.TempDir(), "n8n-guard")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	stopBusy := keepCPUsBusy()
	defer stopBusy()

	data := filepath.Join(t.TempDir(), "data")
	const token = "sigterm-token"
	var accepted, completed []string // keys the server said yes to, over all runs
	var lastA, lastC []string        // those of the run before
	for run := range runs {
		g := startBinary(t, bin, data, token)
		// The keys of the run before must have survived its SIGTERM.
		checkKeys(t, g.base, token, lastA, lastC, run)

		l := newLoad(g.base, token, run)
		l.start(16)
		time.Sleep(time.Duration(150+rand.IntN(250)) * time.Millisecond)
		if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitErr := make(chan error, 1)
		go func() { waitErr <- g.cmd.Wait() }()
		var err error
		select {
		case err = <-waitErr:
		case <-time.After(30 * time.Second):
			g.cmd.Process.Kill()
			t.Fatalf("run %d: the binary did not stop within 30s of SIGTERM:\n%s", run, g.logs)
		}
		l.stop()
		if err != nil {
			t.Fatalf("run %d of %d: exit after SIGTERM under load: %v\n%s", run+1, runs, err, g.logs)
		}
		a, c := l.result()
		if len(a) == 0 {
			t.Fatalf("run %d: no reserve was accepted before SIGTERM: the load did not run", run)
		}
		accepted, completed = append(accepted, a...), append(completed, c...)
		lastA, lastC = a, c
	}
	// And all of them, once, at the end.
	g := startBinary(t, bin, data, token)
	checkKeys(t, g.base, token, accepted, completed, runs)
	g.cmd.Process.Signal(syscall.SIGTERM)
	if err := g.cmd.Wait(); err != nil {
		t.Fatalf("last stop: %v\n%s", err, g.logs)
	}
	t.Logf("%d SIGTERMs under load, all exit 0; %d accepted and %d completed keys all present after restarts",
		runs, len(accepted), len(completed))
}

type guardProcess struct {
	cmd  *exec.Cmd
	base string
	logs *logbuf.Buffer
}

func startBinary(t *testing.T, bin, data, token string) guardProcess {
	t.Helper()
	addr := freeAddr(t)
	logs := &logbuf.Buffer{}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "N8N_GUARD_ADDR="+addr, "N8N_GUARD_DATA="+data, "N8N_GUARD_TOKENS="+token)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	if testwait.Poll(15*time.Second, func() bool {
		res, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}) {
		return guardProcess{cmd: cmd, base: base, logs: logs}
	}
	cmd.Process.Kill()
	t.Fatalf("not ready after 15s:\n%s", logs)
	return guardProcess{}
}

// checkKeys asks the server for every key an earlier run was told was
// accepted (it must exist) or completed (it must still be completed).
func checkKeys(t *testing.T, base, token string, accepted, completed []string, run int) {
	t.Helper()
	state := func(key string) string {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/lookup?namespace=sigterm&key="+url.QueryEscape(key), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("lookup %s: %v", key, err)
		}
		defer res.Body.Close()
		var m struct {
			Found bool   `json:"found"`
			State string `json:"state"`
		}
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != 200 {
			t.Fatalf("lookup %s: %d %v", key, res.StatusCode, err)
		}
		if !m.Found {
			return "absent"
		}
		return m.State
	}
	for _, k := range accepted {
		if s := state(k); s == "absent" {
			t.Fatalf("before run %d: key %s was answered accepted and is gone", run, k)
		}
	}
	for _, k := range completed {
		if s := state(k); s != "completed" {
			t.Fatalf("before run %d: key %s was answered completed and is now %s", run, k, s)
		}
	}
}

// load is 16 workflow-like workers: reserve a new key, complete it. Half
// keep their connection, half open a new one per request, so connections
// keep changing between idle and active while the server stops.
type load struct {
	base, token string
	run         int
	done        chan struct{}
	wg          sync.WaitGroup
	next        atomic.Int64

	mu                  sync.Mutex
	accepted, completed []string
}

func newLoad(base, token string, run int) *load {
	return &load{base: base, token: token, run: run, done: make(chan struct{})}
}

func (l *load) start(workers int) {
	for w := range workers {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: w%2 == 1}}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.done:
					return
				default:
				}
				key := fmt.Sprintf("r%d-%d", l.run, l.next.Add(1))
				var a struct{ Outcome, Token string }
				if post(client, l.base+"/v1/reserve", l.token, map[string]any{"namespace": "sigterm", "key": key}, &a) != nil {
					continue // the server is stopping: refused or cut
				}
				if a.Outcome != "accepted" {
					continue
				}
				l.mu.Lock()
				l.accepted = append(l.accepted, key)
				l.mu.Unlock()
				var c struct{ Outcome string }
				if post(client, l.base+"/v1/complete", l.token, map[string]any{"namespace": "sigterm", "key": key, "token": a.Token, "result_ref": "ref-" + key}, &c) != nil {
					continue
				}
				if c.Outcome == "completed" {
					l.mu.Lock()
					l.completed = append(l.completed, key)
					l.mu.Unlock()
				}
			}
		}()
	}
}

func (l *load) stop() { close(l.done); l.wg.Wait() }

func (l *load) result() (accepted, completed []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted, l.completed
}

// post sends one request; only a 200 with a JSON body decodes into out.
func post(client *http.Client, u, token string, body, out any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return json.Unmarshal(raw, out)
}

// keepCPUsBusy spins one goroutine per CPU until the returned func is
// called, so the server and the load compete for every core.
func keepCPUsBusy() (stop func()) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for !quit.Load() {
				for i := range 100000 {
					x += i
				}
			}
			_ = x
		}()
	}
	return func() { quit.Store(true); wg.Wait() }
}
