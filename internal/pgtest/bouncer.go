package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPgBouncer says no pgbouncer binary was found.
var ErrNoPgBouncer = errors.New("no pgbouncer binary found in PATH or /usr/sbin; install it (Debian: apt-get install pgbouncer)")

// Bouncer is a running PgBouncer in transaction pooling mode in front of
// one PostgreSQL server: every client transaction may run on another
// server connection, so nothing of a session (prepared statements,
// session advisory locks, LISTEN, SET) survives from one transaction to
// the next. That is how PgBouncer is run in front of shared databases, and
// the mode that breaks clients which assume a session.
type Bouncer struct {
	// URL reaches the server's postgres database through the bouncer,
	// with the user of the upstream URL.
	URL   string
	Port  int
	dir   string
	runAs []string
}

// FindPgBouncer returns the pgbouncer binary.
func FindPgBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/bin/pgbouncer", "/usr/local/sbin/pgbouncer"} {
		if isExec(p) {
			return p, nil
		}
	}
	return "", ErrNoPgBouncer
}

// StartBouncer starts PgBouncer in front of the server upstream (a
// postgres:// URL) in transaction pooling mode, on a free loopback port.
// Clients are not authenticated by the bouncer (auth_type trust); it logs
// in to the server as the client's user, with the upstream URL's password.
func StartBouncer(upstream string) (*Bouncer, error) {
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	up, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream URL: %w", err)
	}
	user := up.User.Username()
	if user == "" {
		user = "postgres"
	}
	password, _ := up.User.Password()
	host, port := up.Hostname(), up.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "5432"
	}
	parent := ""
	if os.Geteuid() == 0 {
		parent = "/tmp" // as for the cluster: pgbouncer runs as postgres
	}
	dir, err := os.MkdirTemp(parent, "n8n-guard-pgbouncer-")
	if err != nil {
		return nil, err
	}
	b := &Bouncer{dir: dir}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if b.Port, err = freePort(); err != nil {
		return nil, err
	}
	// pgbouncer refuses to run as root.
	if os.Geteuid() == 0 {
		if err := ensurePostgresUser(); err != nil {
			return nil, err
		}
		b.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(quote(user)+" "+quote(password)+"\n"), 0o644); err != nil {
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
max_db_connections = 40
server_lifetime = 3600
ignore_startup_parameters = extra_float_digits
logfile = %s
pidfile = %s
`, host, port, b.Port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	conf := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(conf, []byte(ini), 0o644); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "postgres:", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("chown %s: %v: %s", dir, err, out)
		}
	}
	all := append(append([]string(nil), b.runAs...), bin, "-d", conf)
	if out, err := exec.Command(all[0], all[1:]...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		return nil, fmt.Errorf("pgbouncer: %v: %s\n%s", err, out, log)
	}
	u := *up
	u.Host = "127.0.0.1:" + strconv.Itoa(b.Port)
	b.URL = u.String()
	ok = true
	watch(b.stopCommand(), dir)
	// The daemon answers once it has read its configuration.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Wait(ctx, b.URL, 10*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		b.Stop()
		return nil, fmt.Errorf("pgbouncer does not answer: %v\n%s", err, log)
	}
	return b, nil
}

// stopCommand is a shell command that stops the daemon.
func (b *Bouncer) stopCommand() []string {
	kill := `kill "$(cat ` + filepath.Join(b.dir, "pgbouncer.pid") + `)"`
	return append(append([]string(nil), b.runAs...), "sh", "-c", kill)
}

// Stop stops PgBouncer and removes its files.
func (b *Bouncer) Stop() error {
	cmd := b.stopCommand()
	out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	os.RemoveAll(b.dir)
	if err != nil {
		return fmt.Errorf("stop pgbouncer: %v: %s", err, out)
	}
	return nil
}

// Log returns what PgBouncer logged so far.
func (b *Bouncer) Log() string {
	raw, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	return string(raw)
}

// NewDatabase creates an empty database on the server at direct and
// returns the URL of it through via (PgBouncer), with pgx told to send
// no prepared statements (default_query_exec_mode=exec), as a deployment
// behind PgBouncer in transaction mode must (docs/postgres.md). A
// database, not a schema: PgBouncer 1.18 does not pass a search_path on.
func NewDatabase(ctx context.Context, direct, via, name string) (string, error) {
	id := pgx.Identifier{name}.Sanitize()
	if err := execAll(ctx, direct, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)", "CREATE DATABASE "+id); err != nil {
		return "", err
	}
	u, err := url.Parse(via)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return WithParam(u.String(), "default_query_exec_mode", "exec")
}
