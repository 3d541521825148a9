package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Restart restarts the server with pg_ctl restart -m mode ("fast":
// clients are disconnected and the server shuts down cleanly;
// "immediate": no shutdown checkpoint, crash recovery at start, as after
// a crash) and waits until it accepts connections again.
func (c *Cluster) Restart(mode string) error {
	data := filepath.Join(c.dir, "data")
	logFile := filepath.Join(c.dir, "server.log")
	out, err := c.command(c.pgCtl, "restart", "-w", "-t", "60", "-m", mode, "-D", data, "-l", logFile).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl restart -m %s: %v: %s", mode, err, out)
	}
	return nil
}

// Restart stops PgBouncer (SIGTERM: it drops its client and server
// connections at once, as a crash or redeploy of the bouncer does) and
// starts it again on the same port with the same configuration.
func (b *Bouncer) Restart() error {
	pidFile := filepath.Join(b.dir, "pgbouncer.pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("pgbouncer pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("pgbouncer pid %q: %w", raw, err)
	}
	stop := b.stopCommand()
	if out, err := exec.Command(stop[0], stop[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("stop pgbouncer: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pgbouncer (pid %d) still running 30s after SIGTERM", pid)
		}
		time.Sleep(20 * time.Millisecond) // polling for the exit of a process we did not start
	}
	bin, err := FindPgBouncer()
	if err != nil {
		return err
	}
	all := append(append([]string(nil), b.runAs...), bin, "-d", filepath.Join(b.dir, "pgbouncer.ini"))
	for try := 0; ; try++ {
		out, err := exec.Command(all[0], all[1:]...).CombinedOutput()
		if err == nil {
			return nil
		}
		// The port can be held for a moment by the old process's socket.
		if try == 50 {
			return fmt.Errorf("start pgbouncer again: %v: %s\n%s", err, out, b.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func runCmd(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

func pgxConnect(ctx context.Context, url string) (*pgx.Conn, error) { return pgx.Connect(ctx, url) }
