package main

import (
	"strings"

	"github.com/n8n-guard/n8n-guard/internal/tlsserve"
	"github.com/spf13/pflag"
	"golang.org/x/crypto/acme/autocert"
)

// tlsFlags are serve's (and probe's) TLS flags; internal/tlsserve serves them.
type tlsFlags struct {
	cfg     tlsserve.Config
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

// config is the parsed tlsserve.Config (after the flags and environment applied).
func (f *tlsFlags) config() tlsserve.Config {
	c := f.cfg
	c.ACMEDomains = nil
	for _, d := range strings.Split(f.domains, ",") {
		if d = strings.TrimSpace(d); d != "" {
			c.ACMEDomains = append(c.ACMEDomains, d)
		}
	}
	return c
}
