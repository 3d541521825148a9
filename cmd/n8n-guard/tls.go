package main

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

	"github.com/spf13/pflag"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// TLSConfig is how serve terminates TLS itself. All empty: plain HTTP
// (behind a reverse proxy that terminates TLS, or on loopback).
type TLSConfig struct {
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

func (t TLSConfig) enabled() bool {
	return t.CertFile != "" || t.KeyFile != "" || len(t.ACMEDomains) > 0
}

type tlsFlags struct {
	cfg     TLSConfig
	domains string
}

func (f *tlsFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.cfg.CertFile, "tls-cert", "", "serve HTTPS with this PEM certificate (chain); reloaded when it changes")
	fs.StringVar(&f.cfg.KeyFile, "tls-key", "", "the PEM private key of --tls-cert; reloaded when it changes")
	fs.StringVar(&f.domains, "acme-domains", "", "serve HTTPS with certificates from ACME (Let's Encrypt) for these comma-separated names")
	fs.StringVar(&f.cfg.ACMEDirectory, "acme-directory", autocert.DefaultACMEDirectory, "ACME directory URL")
	fs.StringVar(&f.cfg.ACMEEmail, "acme-email", "", "contact address given to the ACME CA")
	fs.StringVar(&f.cfg.ACMECache, "acme-cache", "", "folder of ACME account and certificates (default <data>/acme)")
	fs.StringVar(&f.cfg.ACMECARoots, "acme-ca-roots", "", "PEM file of the CAs trusted for the ACME directory (a private CA); default the system's")
	fs.StringVar(&f.cfg.RedirectAddr, "http-redirect-addr", "", "also listen here with plain HTTP: ACME HTTP-01 challenges, and a redirect to https for the rest")
	for flag, env := range map[string]string{
		"tls-cert": "N8N_GUARD_TLS_CERT", "tls-key": "N8N_GUARD_TLS_KEY",
		"acme-domains": "N8N_GUARD_ACME_DOMAINS", "acme-directory": "N8N_GUARD_ACME_DIRECTORY",
		"acme-email": "N8N_GUARD_ACME_EMAIL", "acme-cache": "N8N_GUARD_ACME_CACHE",
		"acme-ca-roots": "N8N_GUARD_ACME_CA_ROOTS", "http-redirect-addr": "N8N_GUARD_HTTP_REDIRECT_ADDR",
	} {
		bindEnv(fs, flag, env)
	}
}

// config is the parsed TLSConfig (after the flags and environment applied).
func (f *tlsFlags) config() TLSConfig {
	c := f.cfg
	c.ACMEDomains = nil
	for _, d := range strings.Split(f.domains, ",") {
		if d = strings.TrimSpace(d); d != "" {
			c.ACMEDomains = append(c.ACMEDomains, d)
		}
	}
	return c
}

// tlsServer is what TLS adds to a running Main: the server's tls.Config
// and, optionally, the plain-HTTP redirect listener.
type tlsServer struct {
	config   *tls.Config
	redirect *http.Server // nil without RedirectAddr
	plain    net.Listener
}

// newTLSServer checks t and prepares certificates: files are loaded once
// now, so a wrong file fails the start rather than the first handshake.
// tlsAddr is the address of the TLS listener (for the redirect's port).
func newTLSServer(t TLSConfig, dataDir, tlsAddr string, log *slog.Logger) (*tlsServer, error) {
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
	ts := &tlsServer{config: &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}}
	var challenges func(http.Handler) http.Handler
	if files {
		cf := &certFiles{cert: t.CertFile, key: t.KeyFile, log: log}
		if _, err := cf.GetCertificate(nil); err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		ts.config.GetCertificate = cf.GetCertificate
	} else {
		m, err := acmeManager(t, dataDir, log)
		if err != nil {
			return nil, err
		}
		ts.config.GetCertificate = m.GetCertificate
		// fasthttp speaks HTTP/1.1 only: no h2, but the TLS-ALPN-01 challenge.
		ts.config.NextProtos = append(ts.config.NextProtos, acme.ALPNProto)
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

// serveRedirect runs the plain-HTTP listener until closeRedirect.
func (ts *tlsServer) serveRedirect() error {
	if err := ts.redirect.Serve(ts.plain); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (ts *tlsServer) close(ctx context.Context) error {
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

func acmeManager(t TLSConfig, dataDir string, log *slog.Logger) (*autocert.Manager, error) {
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
