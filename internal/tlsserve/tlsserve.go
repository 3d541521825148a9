// Package tlsserve is how serve terminates TLS itself: certificate files
// read again when they change, certificates from an ACME CA (autocert),
// and the optional plain-HTTP listener that answers HTTP-01 challenges and
// redirects everything else to https. cmd/n8n-guard only parses the flags.
package tlsserve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// Config is how serve terminates TLS itself. All empty: plain HTTP
// (behind a reverse proxy that terminates TLS, or on loopback).
type Config struct {
	// CertFile and KeyFile are PEM files, read again when either changes
	// (a renewed certificate needs no restart).
	CertFile, KeyFile string
	// ACMEDomains get certificates from an ACME CA (Let's Encrypt by
	// default) through the TLS-ALPN-01 challenge on the TLS port, or
	// HTTP-01 on RedirectAddr.
	ACMEDomains   []string
	ACMEDirectory string // empty: Let's Encrypt
	ACMEEmail     string
	ACMECache     string // empty: <data>/acme
	// ACMECARoots is a PEM file of the CAs trusted for the ACME directory
	// itself (a private or test CA such as pebble); empty: the system's.
	ACMECARoots string
	// RedirectAddr, when set, is a plain-HTTP listener that answers
	// HTTP-01 challenges and redirects everything else to https.
	RedirectAddr string
}

// Enabled says whether TLS is configured at all.
func (t Config) Enabled() bool {
	return t.CertFile != "" || t.KeyFile != "" || len(t.ACMEDomains) > 0
}

// Server is what TLS adds to a running server: its tls.Config and,
// optionally, the plain-HTTP redirect listener.
type Server struct {
	Config   *tls.Config
	redirect *http.Server // nil without RedirectAddr
	plain    net.Listener
}

// New checks t and prepares certificates: files are loaded once
// now, so a wrong file fails the start rather than the first handshake.
// tlsAddr is the address of the TLS listener (for the redirect's port).
func New(t Config, dataDir, tlsAddr string, log *slog.Logger) (*Server, error) {
	files := t.CertFile != "" || t.KeyFile != ""
	switch {
	case files && (t.CertFile == "" || t.KeyFile == ""):
		return nil, errors.New("TLS: give both --tls-cert and --tls-key")
	case files && len(t.ACMEDomains) > 0:
		return nil, errors.New("TLS: give either --tls-cert/--tls-key or --acme-domains, not both")
	case !files && len(t.ACMEDomains) == 0:
		if t.RedirectAddr != "" {
			return nil, errors.New("--http-redirect-addr redirects to https: it needs --tls-cert/--tls-key or --acme-domains")
		}
		return nil, nil
	}
	ts := &Server{Config: &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}}
	var challenges func(http.Handler) http.Handler
	if files {
		cf := &certFiles{cert: t.CertFile, key: t.KeyFile, log: log}
		if _, err := cf.GetCertificate(nil); err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		ts.Config.GetCertificate = cf.GetCertificate
	} else {
		m, err := acmeManager(t, dataDir, log)
		if err != nil {
			return nil, err
		}
		ts.Config.GetCertificate = m.GetCertificate
		// fasthttp speaks HTTP/1.1 only: no h2, but the TLS-ALPN-01 challenge.
		ts.Config.NextProtos = append(ts.Config.NextProtos, acme.ALPNProto)
		challenges = m.HTTPHandler
	}
	if t.RedirectAddr != "" {
		_, port, err := net.SplitHostPort(tlsAddr)
		if err != nil {
			return nil, fmt.Errorf("--addr %q: %w", tlsAddr, err)
		}
		var h http.Handler = redirectToHTTPS(port)
		if challenges != nil {
			h = challenges(h)
		}
		if ts.plain, err = net.Listen("tcp", t.RedirectAddr); err != nil {
			return nil, fmt.Errorf("listen on %s (--http-redirect-addr): %w", t.RedirectAddr, err)
		}
		ts.redirect = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	}
	return ts, nil
}

// Redirects says whether a plain-HTTP redirect listener is configured.
func (ts *Server) Redirects() bool { return ts != nil && ts.redirect != nil }

// ServeRedirect runs the plain-HTTP listener until Close.
func (ts *Server) ServeRedirect() error {
	if err := ts.redirect.Serve(ts.plain); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close shuts the redirect listener down.
func (ts *Server) Close(ctx context.Context) error {
	if ts == nil || ts.redirect == nil {
		return nil
	}
	return ts.redirect.Shutdown(ctx)
}

// redirectToHTTPS answers every request with a permanent redirect to the
// same host and path on the TLS port.
func redirectToHTTPS(port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if port != "443" {
			host = net.JoinHostPort(host, port)
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
}

func acmeManager(t Config, dataDir string, log *slog.Logger) (*autocert.Manager, error) {
	cache := t.ACMECache
	if cache == "" {
		cache = filepath.Join(dataDir, "acme")
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if t.ACMECARoots != "" {
		pem, err := os.ReadFile(t.ACMECARoots)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca-roots: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--acme-ca-roots %s: no PEM certificate in it", t.ACMECARoots)
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	for _, d := range t.ACMEDomains {
		// autocert refuses a name without a dot at handshake time: say so now.
		if !strings.Contains(strings.Trim(d, "."), ".") {
			return nil, fmt.Errorf("--acme-domains: %q is not a public DNS name (it needs a dot)", d)
		}
	}
	log.Info("TLS certificates from ACME", "domains", t.ACMEDomains, "directory", t.ACMEDirectory, "cache", cache)
	return &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		HostPolicy: autocert.HostWhitelist(t.ACMEDomains...),
		Cache:      autocert.DirCache(cache),
		Email:      t.ACMEEmail,
		Client:     &acme.Client{DirectoryURL: t.ACMEDirectory, HTTPClient: hc},
	}, nil
}

// certFiles serves the certificate of two PEM files and loads them again
// when either changes (size or modification time), so a renewal (certbot,
// cert-manager, a mounted Secret) takes effect at the next handshake. A
// pair that does not load (a half-written renewal) keeps the previous
// certificate in service and is logged once; it is tried again when the
// files change again.
type certFiles struct {
	cert, key string
	log       *slog.Logger

	mu      sync.Mutex
	current *tls.Certificate
	seen    [2]fileStamp
}

type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{size: -1}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime()}
}

func (c *certFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := [2]fileStamp{stampOf(c.cert), stampOf(c.key)}
	if c.current != nil && now == c.seen {
		return c.current, nil
	}
	c.seen = now
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		if c.current == nil {
			return nil, fmt.Errorf("certificate %s, key %s: %w", c.cert, c.key, err)
		}
		c.log.Warn("TLS certificate files changed but do not load: still serving the previous certificate",
			"cert", c.cert, "key", c.key, "err", err)
		return c.current, nil
	}
	c.current = &pair
	c.log.Info("TLS certificate loaded", "cert", c.cert, "subject", pair.Leaf.Subject.String(), "not_after", pair.Leaf.NotAfter)
	return c.current, nil
}
