package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/reconcile"
	"github.com/prometheus/client_golang/prometheus"
)

// CheckConfig is one entry of checks: an n8n workflow's webhook the guard
// calls about an unknown key before a person is paged (docs/n8n.md,
// "Checks"). Its credential is the guard's check secret unless
// secret_env names another.
type CheckConfig struct {
	URL string `yaml:"url"`
	// Header is the Header Auth credential's header the Webhook node
	// checks (default X-N8n-Guard-Check).
	Header string `yaml:"header"`
	// SecretEnv names the variable that holds the credential's value
	// (default: the guard's check secret, never the resume secret).
	SecretEnv string `yaml:"secret_env"`
	// Timeout of one call (default 10s); Tries: calls while the check
	// answers 5xx or nothing (default 3), with backoff.
	Timeout Duration `yaml:"timeout"`
	Tries   int      `yaml:"tries"`
}

// checkNamed refuses a check: naming no entry of checks:.
func (fc FileConfig) checkNamed(where, name string) error {
	if name == "" {
		return nil
	}
	if _, ok := fc.Checks[name]; !ok {
		return fmt.Errorf("%s.check: %q is not an entry of checks:", where, name)
	}
	return nil
}

// checkChecks checks the checks: section.
func (fc FileConfig) checkChecks() error {
	for _, name := range sortedKeys(fc.Checks) {
		c := fc.Checks[name]
		where := "checks." + name
		if !keystore.ValidNamespace(name) {
			return fmt.Errorf("%s: not a valid check name (1-64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit)", where)
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.url: %q must be the http(s) URL of the check workflow's webhook (e.g. http://n8n:5678/webhook/n8n-guard-lead-check)", where, c.URL)
		}
		if c.Header != "" && !validHeader(c.Header) {
			return fmt.Errorf("%s.header: %q is not an HTTP header name", where, c.Header)
		}
		if c.Timeout < 0 || time.Duration(c.Timeout) > 5*time.Minute {
			return fmt.Errorf("%s.timeout: must be between 0 (default 10s) and 5m", where)
		}
		if c.Tries < 0 || c.Tries > 10 {
			return fmt.Errorf("%s.tries: %d must be 1-10 (0: default 3)", where, c.Tries)
		}
	}
	return nil
}

func validHeader(h string) bool {
	return strings.IndexFunc(h, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) < 0
}

// startChecks starts the runner that asks the checks (reconcile), when
// the file names any.
func (m *Main) startChecks(ctx context.Context, reg prometheus.Registerer) error {
	cs := m.store
	own := m.checkSecret
	callers, tries := map[string]reconcile.Caller{}, map[string]int{}
	for name, c := range m.Config.File.Checks {
		secret := own
		if c.SecretEnv != "" {
			if secret = strings.TrimSpace(os.Getenv(c.SecretEnv)); secret == "" {
				return fmt.Errorf("checks.%s.secret_env: the variable %s is not set", name, c.SecretEnv)
			}
		}
		callers[name] = &n8n.CheckCaller{URL: c.URL, Header: c.Header, Secret: secret, Timeout: time.Duration(c.Timeout)}
		tries[name] = c.Tries
	}
	every := time.Duration(0) // the runner's default, 1s
	if len(callers) == 0 {
		// Only keys held by a check since taken out of the file can wait:
		// they are paged within a minute.
		every = time.Minute
	}
	r, err := reconcile.New(reconcile.Options{Store: cs, Checks: callers, TriesOf: tries, Interval: every,
		Logger: m.Logger.With("component", "checks"), Registerer: reg, Clock: m.Config.Clock})
	if err != nil {
		return err
	}
	m.start("checks", func() error { return r.Run(ctx) })
	return nil
}
