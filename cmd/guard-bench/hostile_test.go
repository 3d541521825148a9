package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// The soak tool, at a small scale, against the real API in this process:
// the attackers are answered (401), the reserves meanwhile all succeed,
// and the memory is read from /proc.
func TestHostileAgainstTheRealAPI(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc: the tool reads memory there (Linux)")
	}
	st, err := bolt.Open(filepath.Join(t.TempDir(), "bench.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := api.New(api.Config{Store: st, Tokens: []string{"t0k"}, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	url := "http://" + ln.Addr().String()
	err = hostile([]string{"--url", url, "--token", "t0k", "--pid", strconv.Itoa(os.Getpid()),
		"--attackers", "40", "--every", "50ms", "--duration", "2s", "--ramp", "200ms", "--reservers", "2", "--max-rss-mib", "4096"})
	if err != nil {
		t.Fatal(err)
	}
	if err := hostile([]string{"--url", "http://192.0.2.1:8080", "--token", "t", "--pid", "1"}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("attacked a non-loopback address: %v", err)
	}
}

// The reconnecting flood at a small scale: idle sockets without a token
// from 127.0.0.2 keep reconnecting while the reserves come from
// 127.0.0.1. With the per-client share the reserves are answered; with
// the share switched off the flood takes the global slots and the tool
// fails the run.
func TestReconnectFloodAgainstTheRealAPI(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc: the tool reads memory there (Linux)")
	}
	serveWith := func(cfg api.Config) string {
		st, err := bolt.Open(filepath.Join(t.TempDir(), "bench.db"), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg.Store, cfg.Tokens, cfg.Registry = st, []string{"t0k"}, prometheus.NewRegistry()
		srv, err := api.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Shutdown(context.Background()) })
		return "http://" + ln.Addr().String()
	}
	args := func(url string) []string {
		return []string{"--url", url, "--token", "t0k", "--pid", strconv.Itoa(os.Getpid()), "--mode", "reconnect", "--from", "127.0.0.2",
			"--attackers", "60", "--every", "20ms", "--duration", "800ms", "--ramp", "300ms", "--reservers", "2", "--max-rss-mib", "4096"}
	}
	if err := hostile(args(serveWith(api.Config{Limits: api.Limits{MaxConnections: 40, ClientConnections: 10}}))); err != nil {
		t.Fatalf("with the per-client share: %v", err)
	}
	err := hostile(args(serveWith(api.Config{Limits: api.Limits{MaxConnections: 40, ClientConnections: -1}})))
	if err == nil || !strings.Contains(err.Error(), "not answered") {
		t.Fatalf("without the per-client share the flood must starve the reserves, got %v", err)
	}
	if err := hostile(append(args("http://127.0.0.1:1"), "--from", "10.0.0.1")); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("attacked from a non-loopback address: %v", err)
	}
}
