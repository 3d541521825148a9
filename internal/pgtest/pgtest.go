// Package pgtest starts a throwaway PostgreSQL cluster for tests and
// benchmarks: initdb into a temporary folder, pg_ctl start on a free
// loopback port, and Stop removes it all. It uses the server binaries
// installed on the machine and never downloads anything.
//
// initdb refuses to run as root, so as root the cluster is created and run
// as the operating-system user postgres (created when missing) through
// runuser.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres says no PostgreSQL server binaries were found.
var ErrNoPostgres = errors.New("no PostgreSQL server binaries (initdb, pg_ctl) found in PATH, /usr/local/bin or /usr/lib/postgresql/*/bin; install them (Debian: apt-get install postgresql)")

// Options configure Start.
type Options struct {
	// Durable keeps fsync and synchronous_commit on, as in production
	// (benchmarks). Tests leave it false: fsync off makes them fast and
	// changes no behaviour they check.
	Durable bool
	// Settings are extra server settings (name -> value).
	Settings map[string]string
}

// Cluster is a running throwaway server.
type Cluster struct {
	// URL reaches the postgres database as the superuser postgres.
	URL   string
	Port  int
	dir   string
	pgCtl string
	runAs []string
}

// FindBin returns the folder holding initdb and pg_ctl.
func FindBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs := []string{"/usr/local/bin"}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// The newest major version first.
	sort.Slice(versions, func(i, j int) bool { return pgMajor(versions[i]) > pgMajor(versions[j]) })
	dirs = append(dirs, versions...)
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

func pgMajor(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Start creates and starts a cluster.
func Start(opts Options) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	parent := ""
	if os.Geteuid() == 0 {
		// The server runs as postgres, which may not be able to reach
		// root's own TMPDIR; /tmp is open to everyone.
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "n8n-guard-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, pgCtl: filepath.Join(bin, "pg_ctl")}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if os.Geteuid() == 0 {
		if err := ensurePostgresUser(); err != nil {
			return nil, err
		}
		if out, err := exec.Command("chown", "-R", "postgres:", dir).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("chown %s: %v: %s", dir, err, out)
		}
		c.runAs = []string{"runuser", "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	initdb := []string{filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"}
	if !opts.Durable {
		initdb = append(initdb, "--no-sync")
	}
	if out, err := c.command(initdb...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if c.Port, err = freePort(); err != nil {
		return nil, err
	}
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"port":                    strconv.Itoa(c.Port),
		"unix_socket_directories": dir,
		"max_connections":         "200",
	}
	if !opts.Durable {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	var conf strings.Builder
	for k, v := range settings {
		fmt.Fprintf(&conf, "%s = '%s'\n", k, v)
	}
	// Appended as the postgres user may own the file exclusively.
	if err := appendFile(filepath.Join(data, "postgresql.conf"), conf.String()); err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "server.log")
	if out, err := c.command(c.pgCtl, "start", "-w", "-t", "60", "-D", data, "-l", logFile).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(logFile)
		return nil, fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
	ok = true
	watch(append(append([]string(nil), c.runAs...), c.pgCtl, "stop", "-m", "immediate", "-D", filepath.Join(c.dir, "data")), c.dir)
	return c, nil
}

// watch starts a small shell that runs stop and removes dir once this
// process is gone, so a test binary killed by a timeout leaves no server
// behind. Stop makes it unnecessary but does not race with it: stopping
// a stopped server and removing a removed folder are harmless.
func watch(stop []string, dir string) {
	quoted := make([]string, len(stop))
	for i, a := range stop {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done; ` + strings.Join(quoted, " ") + ` >/dev/null 2>&1; rm -rf "$2"`
	cmd := exec.Command("sh", "-c", script, "sh", strconv.Itoa(os.Getpid()), dir)
	cmd.SysProcAttr = detached() // not killed with our process group
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

func (c *Cluster) command(args ...string) *exec.Cmd {
	all := append(append([]string(nil), c.runAs...), args...)
	cmd := exec.Command(all[0], all[1:]...)
	cmd.Dir = c.dir
	return cmd
}

// Stop stops the server and removes its files.
func (c *Cluster) Stop() error {
	out, err := c.command(c.pgCtl, "stop", "-w", "-m", "fast", "-D", filepath.Join(c.dir, "data")).CombinedOutput()
	os.RemoveAll(c.dir)
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// Dir is the cluster's folder (data/ and server.log).
func (c *Cluster) Dir() string { return c.dir }

// NewSchema creates an empty schema and returns a URL whose connections
// use it (search_path), so that each test starts on empty tables.
func NewSchema(ctx context.Context, baseURL, name string) (string, error) {
	id := pgx.Identifier{name}.Sanitize()
	if err := execAll(ctx, baseURL, "DROP SCHEMA IF EXISTS "+id+" CASCADE", "CREATE SCHEMA "+id); err != nil {
		return "", err
	}
	return WithParam(baseURL, "search_path", name)
}

// execAll runs statements, in order, on one connection to url.
func execAll(ctx context.Context, url string, statements ...string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, sql := range statements {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// WithParam returns the postgres:// URL with one query parameter set.
func WithParam(baseURL, key, value string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func ensurePostgresUser() error {
	if _, err := user.Lookup("postgres"); err == nil {
		return nil
	}
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres").CombinedOutput(); err != nil {
		return fmt.Errorf("useradd postgres: %v: %s", err, out)
	}
	return nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Wait polls until the server at url answers, up to d.
func Wait(ctx context.Context, url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			return conn.Close(ctx)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
