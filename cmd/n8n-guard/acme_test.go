//go:build !windows

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ACME against Let's Encrypt's test server pebble (Debian's pebble
// package): the guard gets its certificate through the TLS-ALPN-01
// challenge, which pebble really checks by connecting to the guard's TLS
// port (names resolved by pebble-challtestsrv's DNS, every name is
// 127.0.0.1). Skipped without pebble; under CI=true that fails instead.
func TestServeACMEWithPebble(t *testing.T) {
	pebble, err := exec.LookPath("pebble")
	challsrv, err2 := exec.LookPath("pebble-challtestsrv")
	if err != nil || err2 != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("pebble and pebble-challtestsrv are needed (apt-get install pebble)")
		}
		t.Skip("SKIPPED: pebble not installed (apt-get install pebble); ACME untested")
	}
	dir := t.TempDir()
	ca := newTestCA(t)
	pebbleCert, pebbleKey := filepath.Join(dir, "pebble.crt"), filepath.Join(dir, "pebble.key")
	ca.issue(t, 7, pebbleCert, pebbleKey, "127.0.0.1", "localhost")
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	dnsAddr, dirAddr, mgmtAddr, guardAddr, challMgmt := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	_, guardPort, _ := net.SplitHostPort(guardAddr)

	run := func(name, bin string, env []string, args ...string) {
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
		cmd.Env = append(os.Environ(), env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("%s log:\n%s", name, b[max(0, len(b)-3000):])
			}
		})
	}
	run("challtestsrv", challsrv, nil, "-dns01", dnsAddr, "-http01", "", "-https01", "", "-tlsalpn01", "",
		"-management", challMgmt, "-defaultIPv6", "")
	cfg, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress": dirAddr, "managementListenAddress": mgmtAddr,
		"certificate": pebbleCert, "privateKey": pebbleKey,
		"httpPort": 5002, "tlsPort": atoi(t, guardPort),
	}})
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	run("pebble", pebble, []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"},
		"-config", cfgFile, "-dnsserver", dnsAddr)

	admin := tlsClient(ca.pool)
	waitHTTPS(t, admin, "https://"+dirAddr+"/dir").Body.Close()

	const domain = "guard.example.test"
	logs := startServe(t, map[string]string{"N8N_GUARD_TOKENS": "t"}, "--addr", guardAddr, "--data", filepath.Join(dir, "data"),
		"--acme-domains", domain, "--acme-directory", "https://"+dirAddr+"/dir", "--acme-ca-roots", caFile,
		"--acme-email", "ops@example.test")

	// The first handshake for the name waits for the certificate.
	insecure := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: domain, InsecureSkipVerify: true},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, guardAddr)
		},
	}}
	resp := waitHTTPS(t, insecure, "https://"+domain+":"+guardPort+"/healthz")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz over ACME TLS: %d\n%s", resp.StatusCode, logs)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != domain {
		t.Fatalf("certificate for %v, want %s", leaf.DNSNames, domain)
	}

	// The chain verifies against pebble's root of this run: issued by the
	// CA, not a self-signed stand-in.
	rootResp, err := admin.Get("https://" + mgmtAddr + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	rootPEM, _ := io.ReadAll(rootResp.Body)
	rootResp.Body.Close()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatalf("pebble root: %s", rootPEM)
	}
	inter := x509.NewCertPool()
	for _, c := range resp.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: domain, Roots: roots, Intermediates: inter}); err != nil {
		t.Fatalf("the served certificate does not verify against pebble's root: %v", err)
	}
	// The account and certificate are kept in <data>/acme for the next start.
	if entries, _ := os.ReadDir(filepath.Join(dir, "data", "acme")); len(entries) < 2 {
		t.Fatalf("ACME cache %v: want the account key and the certificate", entries)
	}
	// A name not configured gets no certificate (no order is placed for it).
	other := insecure.Transport.(*http.Transport).Clone()
	other.TLSClientConfig.ServerName = "other.example.test"
	if _, err := (&http.Client{Timeout: 10 * time.Second, Transport: other}).Get("https://other.example.test:" + guardPort + "/healthz"); err == nil {
		t.Fatal("a handshake for a name not in --acme-domains succeeded")
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil {
		t.Fatal(err)
	}
	return n
}
