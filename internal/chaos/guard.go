//go:build unix

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/logbuf"
)

// Build compiles the guard into dir once per run and returns the binary.
func Build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "n8n-guard")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/n8n-guard/n8n-guard/cmd/n8n-guard")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// Guard is one `serve` process, restarted on the same address so the
// clients keep calling it.
type Guard struct {
	Name string
	Base string // http://127.0.0.1:port
	bin  string
	env  []string
	Logs *logbuf.Buffer

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool // SIGSTOPped
}

// NewGuard prepares a guard on a free loopback port.
func NewGuard(name, bin string, env []string) (*Guard, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	return &Guard{Name: name, Base: "http://" + addr, bin: bin, Logs: &logbuf.Buffer{},
		env: append(append(os.Environ(), env...), "N8N_GUARD_ADDR="+addr)}, nil
}

// Start starts the process and waits until /readyz says ready. A process
// that exits before (its store cannot be reached yet: PostgreSQL in
// recovery, PgBouncer refusing logins for a while) is started again, as a
// supervisor (systemd, Kubernetes) would, for up to a minute.
func (g *Guard) Start(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := g.start(ctx)
		if err == nil || !errors.Is(err, errExited) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second): // a supervisor's restart delay
		}
	}
}

var errExited = errors.New("exited before it was ready")

func (g *Guard) start(ctx context.Context) error {
	g.mu.Lock()
	cmd := exec.Command(g.bin, "serve")
	cmd.Env = g.env
	cmd.Stdout, cmd.Stderr = g.Logs, g.Logs
	if err := cmd.Start(); err != nil {
		g.mu.Unlock()
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	g.cmd, g.exited, g.stopped = cmd, exited, false
	g.mu.Unlock()
	return g.waitReady(ctx, exited)
}

func (g *Guard) waitReady(ctx context.Context, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.Base+"/readyz", nil)
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("guard %s %w:\n%s", g.Name, errExited, tail(g.Logs.String()))
		case <-ctx.Done():
			return fmt.Errorf("guard %s not ready: %v\n%s", g.Name, ctx.Err(), tail(g.Logs.String()))
		case <-time.After(50 * time.Millisecond): // polling /readyz
		}
	}
}

// Signal sends sig and, for SIGKILL and SIGTERM, waits for the exit.
func (g *Guard) Signal(sig syscall.Signal) error {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.stopped = sig == syscall.SIGSTOP
	g.mu.Unlock()
	if cmd == nil {
		return errors.New("not running")
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return err
	}
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return nil
	}
	select {
	case <-exited:
		return nil
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("guard %s did not exit within 60s of %v", g.Name, sig)
	}
}

// Running tells whether the process is alive (a stopped one counts).
func (g *Guard) Running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd == nil {
		return false
	}
	select {
	case <-g.exited:
		return false
	default:
		return true
	}
}

// Heal makes the guard serve again whatever a nemesis did to it.
func (g *Guard) Heal(ctx context.Context) error {
	g.mu.Lock()
	stopped, cmd := g.stopped, g.cmd
	g.mu.Unlock()
	if stopped && cmd != nil {
		cmd.Process.Signal(syscall.SIGCONT)
		g.mu.Lock()
		g.stopped = false
		g.mu.Unlock()
	}
	if !g.Running() {
		return g.Start(ctx)
	}
	return g.waitReady(ctx, g.exited)
}

// Close stops the guard for good.
func (g *Guard) Close() {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Kill()
	<-exited
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
