package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// N8nFileConfig is the n8n: section: where the guard's resume calls may
// go (keystore/resume.go). A resume call carries the resume secret, so
// only the n8n instances named here (or by N8N_URL / N8N_API_URL) receive
// one; a reserve or fail whose resume_url points anywhere else is refused.
type N8nFileConfig struct {
	// ResumeOrigins are the n8n instances' addresses as their resume URLs
	// start ($execution.resumeUrl: n8n's WEBHOOK_URL, default
	// http://localhost:5678), e.g. https://n8n.example.org. Empty: the
	// origin of N8N_URL, and of N8N_API_URL.
	ResumeOrigins []string `yaml:"resume_origins"`
	// ResumePath is n8n's waiting-webhook path (n8n's
	// N8N_ENDPOINT_WEBHOOK_WAIT; default webhook-waiting).
	ResumePath string `yaml:"resume_path"`
	// WebhookURL is n8n's public webhook address (n8n's WEBHOOK_URL, e.g.
	// https://n8n.example.org/), where its resume URLs start when the
	// guard reaches n8n privately: resume URLs there are accepted and
	// called at N8N_API_URL's instance (the address the guard calls n8n
	// at; else N8N_URL's) with the same path.
	// N8N_WEBHOOK_URL replaces it.
	WebhookURL string `yaml:"webhook_url"`
}

// resumeTargets are the n8n instances resume URLs may point at:
// N8N_GUARD_RESUME_ORIGINS (comma-separated, replacing the file's list),
// else n8n.resume_origins, else the origins of N8N_URL and N8N_API_URL;
// and n8n's public webhook address (N8N_WEBHOOK_URL, else
// n8n.webhook_url), called at the private one: N8N_API_URL's instance,
// where the guard calls n8n already, else N8N_URL (where people open n8n,
// which may well be public). The private origins stay accepted:
// executions parked before n8n's WEBHOOK_URL became public carry them.
func (c Config) resumeTargets() (keystore.ResumeTargets, error) {
	origins := c.ResumeOrigins
	if len(origins) == 0 {
		origins = c.File.N8n.ResumeOrigins
	}
	if len(origins) == 0 {
		for _, u := range []string{c.N8nURL, c.N8nAPIURL} {
			if u != "" {
				origins = append(origins, n8n.New(u, "", 0).Base())
			}
		}
	}
	path := c.ResumePath
	if path == "" {
		path = c.File.N8n.ResumePath
	}
	t, err := keystore.NewResumeTargets(origins, path)
	if err != nil {
		return t, fmt.Errorf("n8n.resume_origins / N8N_GUARD_RESUME_ORIGINS: %w", err)
	}
	if public := cmp.Or(c.N8nWebhookURL, c.File.N8n.WebhookURL); public != "" {
		private := ""
		if u := cmp.Or(c.N8nAPIURL, c.N8nURL); u != "" {
			private = n8n.New(u, "", 0).Base()
		}
		if t, err = t.WithPublic(public, private); err != nil {
			return t, fmt.Errorf("N8N_WEBHOOK_URL / n8n.webhook_url: %w", err)
		}
	}
	return t, nil
}

// logResumeTargets says once at start where resume calls go, or that
// parking is off and which setting turns it on.
func logResumeTargets(log *slog.Logger, t keystore.ResumeTargets) {
	if !t.Configured() {
		log.Warn("parking is off: no n8n address is configured for resume calls, so reserves and fails with resume_url are refused (resume_unconfigured); set N8N_URL, or n8n.resume_origins in the config file / N8N_GUARD_RESUME_ORIGINS")
		return
	}
	log.Info("resume calls go only to the configured n8n", "origins", strings.Join(t.Origins(), ","), "path", t.Path())
}
