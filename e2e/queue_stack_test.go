//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
)

// The stack of TestQueueMode: n8n as teams run it once one process is not
// enough. One main process takes the webhooks and puts each execution on
// a Redis queue (Bull); two workers take them off and run them; all three
// share one PostgreSQL database (queue mode cannot run on SQLite). Two
// n8n-guard processes share one PostgreSQL keystore behind a round-robin
// balancer (queue_balancer_test.go).

// queueGuardConfig: the lease is set per reserve by the lead workflow's
// Config node (queueLease); the namespace names who resolves stuck keys.
const queueGuardConfig = `namespaces:
  crm-contacts:
    lease: 45s
    owner: U0CRMOWNER
    runbook: "Look the lead up in the CRM by its event id, then resolve the key."
destinations:
  crm:
    cooldown: 3s
    failure_threshold: 5
    unreachable_threshold: 1   # its own workflows report it: one refused connection opens it
    owner: U0CRMOWNER
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
  group_window: 1s
`

// queueLease is the lead workflow's lease_seconds in this test: longer
// than the CRM's timeout (queueCRMTimeout) plus the time a loaded worker
// needs to record the result, short enough that a key whose holder was
// killed goes unknown within the test.
const (
	queueLease      = 45 // seconds
	queueCRMTimeout = 5000
)

// queueStack is what TestQueueMode runs on.
type queueStack struct {
	*suite
	redis    *redisServer
	pg       *pgtest.Cluster
	guards   []*guard
	balancer *guardBalancer
	crmFront *slowFront
	workers  []*n8nInstance
}

// newQueueSuite is newSuite without its bbolt guard: the n8n install, the
// guard binary, the fake CRM and Slack. The guards of queue mode run on
// PostgreSQL (startGuards).
func newQueueSuite(t *testing.T) *suite {
	t.Helper()
	return newBareSuite(t, 4*time.Minute, " in queue mode")
}

// startQueueStack starts everything: PostgreSQL (one database for n8n, one
// for the guards' keystore), Redis, two guards behind the balancer, the
// slow front of the CRM, n8n main with the shipped lead and error
// workflows, and two workers.
func startQueueStack(t *testing.T) *queueStack {
	t.Helper()
	redisBin := needRedis(t)
	pg := needPostgres(t)
	q := &queueStack{suite: newQueueSuite(t), pg: pg}
	var err error
	if q.redis, err = startRedis(redisBin, q.work); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.redis.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	storeURL, err := pgtest.NewDatabase(ctx, pg.URL, pg.URL, "guard")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgtest.NewDatabase(ctx, pg.URL, pg.URL, "n8n"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		g, err := startPostgresGuard(q.guardBin, filepath.Join(q.work, fmt.Sprintf("guard-%d", i)), storeURL, q.slack.APIURL(), q.resumeEnv())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Stop)
		q.guards = append(q.guards, g)
	}
	if q.balancer, err = startGuardBalancer(q.guards[0].URL(), q.guards[1].URL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.balancer.Close)
	if q.crmFront, err = startSlowFront(q.crm.URL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.crmFront.Close)

	files, err := q.queueFiles()
	if err != nil {
		t.Fatal(err)
	}
	activate := []string{"n8nGuardLeadCrm1"}
	if q.install.Major() >= 2 {
		activate = append(activate, errorWorkflow) // 2.x runs an error workflow only when published
	}
	q.startN8N(t, q.queueEnv(), files, activate, []string{leadPath}, false)

	// The workers start once main has migrated the database; in parallel,
	// as an orchestrator starts replicas.
	errs := make(chan error, 2)
	for i := 1; i <= 2; i++ {
		w, err := q.newWorker(i)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		q.workers = append(q.workers, w)
		go func() { errs <- w.startWorker() }()
	}
	for range q.workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return q
}

// queueFiles are the shipped lead and error workflows, their Config nodes
// pointed at the balancer and the CRM's front, with this test's lease.
func (q *queueStack) queueFiles() (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, name := range []string{"lead-to-crm.json", "error-to-guard.json"} {
		b, err := configure(filepath.Join(q.repo, "workflows", name), map[string]any{
			"guard_url": q.balancer.URL(), "crm_base_url": q.crmFront.URL(),
			"crm_timeout_ms": queueCRMTimeout, "lease_seconds": queueLease,
		})
		if err != nil {
			return nil, err
		}
		files["shipped-"+name] = b
	}
	return files, nil
}

// queueEnv is what main and the workers share: queue mode, the Redis of
// the queue, the one PostgreSQL database (N8N_ENCRYPTION_KEY, the same on
// every process, is set by newN8N). A killed worker's job is noticed when
// its lock is not renewed: Bull's defaults (lock 60 s, stall check every
// 30 s) are shortened so the test waits seconds, not minutes.
func (q *queueStack) queueEnv() map[string]string {
	env := map[string]string{
		"EXECUTIONS_MODE":               "queue",
		"QUEUE_BULL_REDIS_HOST":         "127.0.0.1",
		"QUEUE_BULL_REDIS_PORT":         fmt.Sprint(q.redis.port),
		"QUEUE_WORKER_LOCK_DURATION":    "20000",
		"QUEUE_WORKER_LOCK_RENEW_TIME":  "5000",
		"QUEUE_WORKER_STALLED_INTERVAL": "10000",
		"DB_TYPE":                       "postgresdb",
		"DB_POSTGRESDB_HOST":            "127.0.0.1",
		"DB_POSTGRESDB_PORT":            fmt.Sprint(q.pg.Port),
		"DB_POSTGRESDB_DATABASE":        "n8n",
		"DB_POSTGRESDB_USER":            "postgres",
		// A worker runs the execution and builds its resume URL: without
		// WEBHOOK_URL it names the worker's own port, which is neither
		// where n8n takes webhooks nor an origin the guard resumes
		// (n8n's queue-mode docs: set it on every process).
		"WEBHOOK_URL": fmt.Sprintf("http://localhost:%d/", q.n8nPort),
	}
	if q.install.Major() == 1 {
		// n8n 1.x runs a stalled job again, once by default, under the
		// same execution id; 2.x never does (it hard-codes 0 and knows
		// no such setting). The same execution id gives the same
		// request_id, which the guard must take for a repeat of the
		// reserve: see docs/n8n.md, queue mode.
		env["QUEUE_WORKER_MAX_STALLED_COUNT"] = "0"
	}
	return env
}

// newWorker prepares worker i: the shared environment plus its own health
// port, on which /healthz/readiness tells when it takes jobs.
func (q *queueStack) newWorker(i int) (*n8nInstance, error) {
	env := q.queueEnv()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	env["QUEUE_HEALTH_CHECK_ACTIVE"] = "true"
	env["QUEUE_HEALTH_CHECK_PORT"] = fmt.Sprint(port)
	env["N8N_WORKER_SERVER_ADDRESS"] = "127.0.0.1"
	w, err := newN8N(q.install, filepath.Join(q.work, fmt.Sprintf("worker-%d", i)), env)
	if err != nil {
		return nil, err
	}
	w.port = port // URL() now names the worker's health server
	return w, nil
}

// startWorker runs `n8n worker` (own process group: it spawns a task
// runner) and waits until it is ready to take jobs.
func (n *n8nInstance) startWorker() error {
	n.cmd = exec.Command(n.bin, "worker")
	n.cmd.Env = n.env
	n.cmd.Dir = n.folder
	n.cmd.Stdout, n.cmd.Stderr = n.logf, n.logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return err
	}
	n.done = make(chan struct{})
	go func() { n.cmd.Wait(); close(n.done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL()+"/healthz/readiness", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-n.done:
			return errors.New("n8n worker exited while starting; see " + n.logf.Name())
		case <-ctx.Done():
			return fmt.Errorf("n8n worker not ready: %w; see %s", ctx.Err(), n.logf.Name())
		case <-time.After(time.Second):
		}
	}
}

// Kill ends the process group at once (SIGKILL), as the kernel's OOM
// killer or a lost machine does: no graceful shutdown, jobs in flight
// are left as they were.
func (n *n8nInstance) Kill() {
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
}

// startPostgresGuard runs the real binary on the shared PostgreSQL store;
// dir holds its config, its data folder (unused by the store) and its log.
func startPostgresGuard(bin, dir, storeURL, slackURL string, env ...string) (*guard, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "guard.yaml")
	if err := os.WriteFile(cfg, []byte(queueGuardConfig), 0o644); err != nil {
		return nil, err
	}
	g := &guard{addr: fmt.Sprintf("127.0.0.1:%d", port), bin: bin, logPath: filepath.Join(dir, "guard.log")}
	g.api = client.New(g.URL(), client.Options{Token: guardToken, Timeout: time.Minute})
	g.args = []string{"serve", "--addr", g.addr, "--data", filepath.Join(dir, "data"), "--config", cfg, "--store", storeURL}
	g.env = append(os.Environ(), "N8N_GUARD_TOKENS="+guardToken, "SLACK_BOT_TOKEN=xoxb-test", "SLACK_API_URL="+slackURL)
	g.env = append(g.env, env...)
	return g, g.start()
}

// Kill ends the guard with SIGKILL: requests in flight get no answer.
func (g *guard) Kill() {
	_ = g.cmd.Process.Kill()
	<-g.done
	g.logf.Close()
}

// needPostgres starts a throwaway PostgreSQL for n8n and the guards. As
// everywhere in this project: without server binaries it skips loudly,
// but fails under CI=true.
func needPostgres(t *testing.T) *pgtest.Cluster {
	t.Helper()
	c, err := pgtest.Start(pgtest.Options{Settings: map[string]string{"max_connections": "300"}})
	if errors.Is(err, pgtest.ErrNoPostgres) && os.Getenv("CI") != "true" {
		msg := "SKIPPING n8n queue mode: " + err.Error()
		fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
		t.Skip(msg)
	}
	if err != nil {
		t.Fatalf("start PostgreSQL for n8n queue mode: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// needRedis finds Debian's redis-server (.ci/run installs it); skips
// loudly without it, fails under CI=true.
func needRedis(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	msg := "no redis-server in PATH or /usr/bin; install it (Debian: apt-get install redis-server)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, "\n!!! SKIPPING n8n queue mode:", msg, "!!!")
	t.Skip("SKIPPING n8n queue mode: " + msg)
	return ""
}

// redisServer is a throwaway Redis on a free loopback port, nothing saved.
type redisServer struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

func startRedis(bin, work string) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(work, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &redisServer{port: port, done: make(chan struct{})}
	r.cmd = exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no")
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if r.ping() == nil {
			return r, nil
		}
		select {
		case <-r.done:
			return nil, fmt.Errorf("redis-server exited while starting; see %s", filepath.Join(dir, "redis.log"))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("redis-server does not answer PING; see %s", filepath.Join(dir, "redis.log"))
		}
	}
}

// ping speaks the one line of Redis's protocol needed to know it is up.
func (r *redisServer) ping() error {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("redis answered %q to PING", line)
	}
	return nil
}

func (r *redisServer) Stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}
