package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// runCLI runs one n8n-guard command line in this process.
func runCLI(t *testing.T, vars map[string]string, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	cmd := newRootCmd(env(vars), &out, io.Discard)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func lookupState(t *testing.T, base, token, ns, key string) string {
	t.Helper()
	status, d := call(t, base, token, http.MethodGet, "/v1/lookup?namespace="+url.QueryEscape(ns)+"&key="+url.QueryEscape(key), nil)
	if status != http.StatusOK {
		t.Fatalf("lookup %s/%s: %d %v", ns, key, status, d)
	}
	s, _ := d["state"].(string)
	return s
}

// A backup taken while reserves go on, restored into a fresh data folder,
// holds every key answered before the backup started, in the state it
// was answered with.
func TestBackupUnderLoadRestores(t *testing.T) {
	const token = "admin-token"
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{token}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()

	// Keys in each state, answered before anything else starts.
	want := map[string]string{}
	for i := range 60 {
		key := fmt.Sprintf("before-%d", i)
		status, d := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": key})
		if status != 200 || d["outcome"] != "accepted" {
			t.Fatalf("reserve %s: %d %v", key, status, d)
		}
		tok := d["token"]
		switch i % 4 {
		case 0:
			status, d = call(t, base, token, http.MethodPost, "/v1/complete", map[string]any{"namespace": "crm", "key": key, "token": tok, "result_ref": "c-" + key})
		case 1:
			status, d = call(t, base, token, http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm", "key": key, "token": tok, "reason": "validation_failed", "message": "bad phone"})
		case 2:
			status, d = call(t, base, token, http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm", "key": key, "token": tok, "reason": "outcome_unknown"})
		}
		if status != 200 {
			t.Fatalf("report %s: %d %v", key, status, d)
		}
		want[key] = d["state"].(string)
	}

	// Load: unique reserves from 8 clients, each answer stamped when it
	// arrived, until the backup is done and a little after.
	type answered struct {
		key string
		at  time.Time
	}
	var (
		mu    sync.Mutex
		load  []answered
		stop  atomic.Bool
		wg    sync.WaitGroup
		count atomic.Int64
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				key := fmt.Sprintf("load-%d-%d", g, n)
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/reserve", strings.NewReader(`{"namespace":"crm","key":"`+key+`"}`))
				req.Header.Set("Authorization", "Bearer "+token)
				res, err := client.Do(req)
				if err != nil {
					t.Errorf("reserve under load: %v", err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("reserve under load: HTTP %d", res.StatusCode)
					return
				}
				mu.Lock()
				load = append(load, answered{key, time.Now()})
				mu.Unlock()
				count.Add(1)
			}
		}()
	}
	testwait.Within(t, 2*time.Minute, "200 reserves answered under load", func() bool { return count.Load() >= 200 || t.Failed() })
	out := filepath.Join(t.TempDir(), "backup.db")
	started := time.Now()
	msg, err := runCLI(t, map[string]string{"N8N_GUARD_TOKEN": token}, "backup", "--url", base, "--out", out)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if !strings.Contains(msg, "consistency check passed") {
		t.Fatalf("backup said: %q", msg)
	}
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	var before, during int
	for _, a := range load {
		switch {
		case a.at.Before(started):
			want[a.key] = "reserved"
			before++
		default:
			// The copy itself takes milliseconds: what shows it ran under
			// load is that reserves went on being answered once it began.
			during++
		}
	}
	if before == 0 || during == 0 {
		t.Fatalf("not a backup under load: %d reserves answered before it, %d after it began", before, during)
	}

	// Restore: the backup is the store file of a fresh data folder.
	restored := t.TempDir()
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, StoreFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if msg, err := runCLI(t, nil, "store", "check", "--data", restored); err != nil || !strings.Contains(msg, ": ok") {
		t.Fatalf("store check of the restored folder: %q %v", msg, err)
	}
	m2 := NewMain(Config{Addr: "127.0.0.1:0", DataDir: restored, Tokens: []string{token}}, nil)
	if err := m2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	base2 := "http://" + m2.Addr()
	for key, state := range want {
		if got := lookupState(t, base2, token, "crm", key); got != state {
			t.Errorf("%s after restore: %s, answered %s before the backup", key, got, state)
		}
	}
	t.Logf("restored %d keys answered before the backup (%d under load); %d more were answered after it began", len(want), before, during)
}

// Offline, the backup copies the file of a stopped server and refuses
// while one runs; an existing file is never overwritten.
func TestBackupOffline(t *testing.T) {
	const token = "admin-token"
	data := t.TempDir()
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{token}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	if status, d := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "k1"}); status != 200 {
		t.Fatalf("reserve: %d %v", status, d)
	}
	out := filepath.Join(t.TempDir(), "offline.db")
	if _, err := runCLI(t, nil, "backup", "--offline", "--data", data, "--out", out); err == nil || !strings.Contains(err.Error(), "leave out --offline") {
		t.Fatalf("offline backup while the server runs: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused backup left %s behind: %v", out, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if msg, err := runCLI(t, nil, "backup", "--offline", "--data", data, "--out", out); err != nil || !strings.Contains(msg, "1 keys") {
		t.Fatalf("offline backup: %q %v", msg, err)
	}
	if _, err := runCLI(t, nil, "backup", "--offline", "--data", data, "--out", out); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("a second backup to the same file: %v", err)
	}
	if _, err := os.Stat(out + ".partial"); !os.IsNotExist(err) {
		t.Fatalf("a .partial file was left behind: %v", err)
	}
}

// A server on PostgreSQL does not copy itself: the command says to use
// pg_dump and writes nothing.
func TestBackupOfPostgresRefused(t *testing.T) {
	u := pgtest.FreshSchema(t, pgtest.URL(t, "the backup-on-PostgreSQL test"))
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"tok"}, Store: u}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out := filepath.Join(t.TempDir(), "pg.db")
	_, err := runCLI(t, map[string]string{"N8N_GUARD_TOKEN": "tok"}, "backup", "--url", "http://"+m.Addr(), "--out", out)
	if err == nil || !strings.Contains(err.Error(), "unsupported (HTTP 501)") || !strings.Contains(err.Error(), "pg_dump") {
		t.Fatalf("backup of a PostgreSQL server: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused backup left %s: %v", out, err)
	}
}
