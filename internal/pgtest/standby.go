package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// A primary with a synchronous standby on this machine, for failover
// tests: StartStandby copies the primary with pg_basebackup and starts the
// copy as a streaming standby; MakeSynchronous makes every commit wait for
// it; Crash stops a server as a crash would; Promote makes the standby the
// primary. docs/postgres.md ("Failover") lists the settings.

// StartStandby starts a streaming standby of c under the
// application_name name, on port (0: a free one), stopped with Stop. A
// failover test gives it the port of the primary that crashed, so that the
// guards' connection string (both hosts) stays the same.
func (c *Cluster) StartStandby(name string, port int) (*Cluster, error) {
	// Next to the real pg_ctl: /usr/local/bin may hold only a link to it.
	real, err := filepath.EvalSymlinks(c.pgCtl)
	if err != nil {
		return nil, err
	}
	bin := filepath.Dir(real)
	parent := ""
	if os.Geteuid() == 0 {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "n8n-guard-pg-standby-")
	if err != nil {
		return nil, err
	}
	s := &Cluster{dir: dir, pgCtl: c.pgCtl, runAs: c.runAs}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if len(c.runAs) > 0 {
		if out, err := runCmd("chown", "-R", "postgres:", dir); err != nil {
			return nil, fmt.Errorf("chown %s: %v: %s", dir, err, out)
		}
	}
	data := filepath.Join(dir, "data")
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", c.Port, name)
	if out, err := s.command(filepath.Join(bin, "pg_basebackup"), "-d", conninfo, "-D", data, "-R", "-X", "stream", "-c", "fast", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %v: %s", err, out)
	}
	if s.Port = port; port == 0 {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	conf := fmt.Sprintf("port = '%d'\nunix_socket_directories = '%s'\nprimary_conninfo = '%s'\n", s.Port, dir, conninfo)
	if err := appendFile(filepath.Join(data, "postgresql.conf"), conf); err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "server.log")
	if out, err := s.command(s.pgCtl, "start", "-w", "-t", "60", "-D", data, "-l", logFile).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(logFile)
		return nil, fmt.Errorf("pg_ctl start (standby): %v: %s\n%s", err, out, log)
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	ok = true
	watch(append(append([]string(nil), s.runAs...), s.pgCtl, "stop", "-m", "immediate", "-D", data), dir)
	return s, nil
}

// MakeSynchronous makes every commit on c wait until the standby named
// name has it (synchronous_standby_names, synchronous_commit on), and
// waits until the standby reports itself synchronous.
func (c *Cluster) MakeSynchronous(ctx context.Context, name string) error {
	if err := execAll(ctx, c.URL, "ALTER SYSTEM SET synchronous_standby_names = '"+name+"'",
		"ALTER SYSTEM SET synchronous_commit = 'on'", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		state, err := queryString(ctx, c.URL, "SELECT coalesce((SELECT sync_state FROM pg_stat_replication WHERE application_name = '"+name+"'), '')")
		if err == nil && state == "sync" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("standby %s not synchronous after 60s (state %q, %v)", name, state, err)
		}
		time.Sleep(100 * time.Millisecond) // polling pg_stat_replication
	}
}

// Crash stops the server without a shutdown checkpoint (pg_ctl stop -m
// immediate), as a crash of its machine would stop it.
func (c *Cluster) Crash() error {
	out, err := c.command(c.pgCtl, "stop", "-w", "-m", "immediate", "-D", filepath.Join(c.dir, "data")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v: %s", err, out)
	}
	return nil
}

// Promote makes a standby the primary and waits until it takes writes.
func (c *Cluster) Promote(ctx context.Context) error {
	out, err := c.command(c.pgCtl, "promote", "-w", "-t", "60", "-D", filepath.Join(c.dir, "data")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl promote: %v: %s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, err := queryString(ctx, c.URL, "SELECT pg_is_in_recovery()::text")
		if err == nil && v == "false" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still in recovery 60s after promote (%v)", err)
		}
		time.Sleep(100 * time.Millisecond) // polling pg_is_in_recovery
	}
}

func queryString(ctx context.Context, url, sql string) (string, error) {
	conn, err := pgxConnect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var v string
	err = conn.QueryRow(ctx, sql).Scan(&v)
	return v, err
}

// Exec runs statements, in order, on one connection to url.
func Exec(ctx context.Context, url string, statements ...string) error {
	return execAll(ctx, url, statements...)
}
