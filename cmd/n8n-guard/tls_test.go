package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "n8n-guard test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	return ca
}

// issue writes a certificate for names (DNS names or IPs) and its key
// as PEM to certPath and keyPath, with the given serial number.
func (ca *testCA) issue(t *testing.T, serial int64, certPath, keyPath string, names ...string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	// Written beside and renamed, as certbot and Kubernetes Secrets do.
	writeAtomic(t, keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	writeAtomic(t, certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// tlsClient trusts only pool, on a fresh connection per request (each
// request sees the certificate served at that moment).
func tlsClient(pool *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// startServe runs the serve command with args until the test ends.
func startServe(t *testing.T, vars map[string]string, args ...string) *logbuf.Buffer {
	t.Helper()
	logs := &logbuf.Buffer{}
	cmd := newRootCmd(env(vars), io.Discard, logs)
	cmd.SetArgs(append([]string{"serve"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop:\n%s", logs)
		}
	})
	return logs
}

func waitHTTPS(t *testing.T, c *http.Client, url string) *http.Response {
	t.Helper()
	var resp *http.Response
	var err error
	if !testwait.Poll(20*time.Second, func() bool { resp, err = c.Get(url); return err == nil }) {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp
}

// serve --tls-cert/--tls-key: HTTPS with HSTS, the console's cookie
// Secure, a renewed certificate served without a restart, a broken
// renewal leaving the last good one in service, the redirect from plain
// HTTP, and the probe over TLS.
func TestServeTLSFromFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, 100, certPath, keyPath, "127.0.0.1", "guard.example.test")
	addr, plainAddr := freeAddr(t), freeAddr(t)
	vars := map[string]string{"N8N_GUARD_TOKENS": "tls-token", "N8N_GUARD_TLS_CERT": certPath}
	logs := startServe(t, vars, "--addr", addr, "--data", filepath.Join(dir, "data"),
		"--tls-key", keyPath, "--http-redirect-addr", plainAddr)
	c := tlsClient(ca.pool)
	base := "https://" + addr

	resp := waitHTTPS(t, c, base+"/readyz")
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 100 {
		t.Fatalf("readyz over TLS: %d %+v", resp.StatusCode, resp.TLS)
	}
	if resp.Header.Get("Strict-Transport-Security") != api.HSTS {
		t.Fatalf("no HSTS over TLS: %v", resp.Header)
	}

	t.Run("console cookie is Secure", func(t *testing.T) {
		resp, err := c.PostForm(base+"/ui/signin", url.Values{"token": {"tls-token"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cks := resp.Cookies()
		if len(cks) != 1 || !cks[0].Secure || !strings.HasPrefix(cks[0].Name, "__Host-") {
			t.Fatalf("sign-in over the guard's own TLS: HTTP %d, cookies %+v", resp.StatusCode, cks)
		}
	})

	t.Run("plain HTTP is redirected to https", func(t *testing.T) {
		resp, err := c.Get("http://" + plainAddr + "/v1/keys?state=unknown")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != base+"/v1/keys?state=unknown" {
			t.Fatalf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})

	t.Run("probe over TLS", func(t *testing.T) {
		var out bytes.Buffer
		cmd := newRootCmd(env(vars), &out, &out)
		cmd.SetArgs([]string{"probe", "--addr", strings.Replace(addr, "127.0.0.1", "0.0.0.0", 1)})
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("probe: %v\n%s", err, out.String())
		}
	})

	t.Run("renewed certificate served without restart", func(t *testing.T) {
		time.Sleep(20 * time.Millisecond) // a later modification time
		ca.issue(t, 101, certPath, keyPath, "127.0.0.1", "guard.example.test")
		resp := waitHTTPS(t, c, base+"/healthz")
		resp.Body.Close()
		if got := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); got != 101 {
			t.Fatalf("serial %d after the renewal, want 101", got)
		}
	})

	t.Run("broken renewal keeps the last good certificate", func(t *testing.T) {
		writeAtomic(t, keyPath, []byte("-----BEGIN EC PRIVATE KEY-----\nbroken\n-----END EC PRIVATE KEY-----\n"))
		resp := waitHTTPS(t, c, base+"/healthz")
		resp.Body.Close()
		if got := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); got != 101 {
			t.Fatalf("serial %d after a broken renewal, want 101 still", got)
		}
		if !strings.Contains(logs.String(), "do not load: still serving the previous certificate") {
			t.Fatalf("the broken renewal is not logged:\n%s", logs)
		}
	})
}

func TestTLSSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", filepath.Join(dir, "x.crt")}, "both --tls-cert and --tls-key"},
		{"files and ACME", []string{"--tls-cert", "a", "--tls-key", "b", "--acme-domains", "guard.example.org"}, "not both"},
		{"missing files", []string{"--tls-cert", filepath.Join(dir, "x.crt"), "--tls-key", filepath.Join(dir, "x.key")}, "no such file"},
		{"ACME name without a dot", []string{"--acme-domains", "localhost"}, "needs a dot"},
		{"redirect without TLS", []string{"--http-redirect-addr", "127.0.0.1:0"}, "needs --tls-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newRootCmd(env(map[string]string{"N8N_GUARD_TOKENS": "t"}), io.Discard, io.Discard)
			cmd.SetArgs(append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, tc.args...))
			if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error about %q, got %v", tc.want, err)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"t"}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	probe := func(addr string) error {
		cmd := newRootCmd(env(nil), io.Discard, io.Discard)
		cmd.SetArgs([]string{"probe", "--addr", addr})
		return cmd.ExecuteContext(context.Background())
	}
	if err := probe(m.Addr()); err != nil {
		t.Fatalf("probe of a ready server: %v", err)
	}
	if err := probe(freeAddr(t)); err == nil {
		t.Fatal("probe of a port nobody listens on succeeded")
	}
	// Draining (after SIGTERM) is not ready: the probe says so.
	m.server.Shutdown(context.Background())
	if err := probe(m.Addr()); err == nil {
		t.Fatal("probe of a stopped server succeeded")
	}
}

func TestProbeURL(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"0.0.0.0:8080", "http://127.0.0.1:8080/readyz"},
		{":8080", "http://127.0.0.1:8080/readyz"},
		{"[::]:8080", "http://[::1]:8080/readyz"},
		{"10.0.0.5:9000", "http://10.0.0.5:9000/readyz"},
	} {
		if got, err := probeURL(tc.addr, "/readyz", false); err != nil || got != tc.want {
			t.Errorf("probeURL(%q) = %q, %v; want %q", tc.addr, got, err, tc.want)
		}
	}
}
