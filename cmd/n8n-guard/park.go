package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/durable"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/prometheus/client_golang/prometheus"
)

// ResumeSecretFile holds the header credential of the resume calls to
// parked executions when N8N_GUARD_RESUME_SECRET is not set. The Wait
// nodes' Header Auth credential in n8n must hold the same value
// (header X-N8n-Guard-Resume).
const ResumeSecretFile = n8n.ResumeSecretFile

// startCatchUp starts the runner that resumes parked executions once
// their destination is back (catchup).
func (m *Main) startCatchUp(ctx context.Context, policies keystore.Policies, reg prometheus.Registerer) error {
	secret := m.resumeSecret
	r, err := catchup.New(catchup.Options{
		Store:      m.store,
		Resumer:    &n8n.ResumeCaller{Header: n8n.ResumeDefaultHeader, Secret: secret, Targets: policies.Resume},
		Policies:   policies,
		Logger:     m.Logger.With("component", "catch-up"),
		Registerer: reg,
		Clock:      m.Config.Clock,
		Grace:      m.Config.ShutdownTimeout,
	})
	if err != nil {
		return err
	}
	m.start("catch-up", func() error { return r.Run(ctx) })
	return nil
}

// resumeSecret returns the configured resume credential, or the one in
// <data>/resume-secret, generated on first start.
func resumeSecret(configured, dataDir string) (string, error) {
	return guardSecret(configured, dataDir, ResumeSecretFile, "N8N_GUARD_RESUME_SECRET", "resume")
}

// checkSecret returns the configured check credential, or the one in
// <data>/check-secret, generated on first start: one secret per purpose,
// so the checks' webhooks never hold the secret that wakes parked
// executions.
func checkSecret(configured, dataDir string) (string, error) {
	return guardSecret(configured, dataDir, n8n.CheckSecretFile, "N8N_GUARD_CHECK_SECRET", "check")
}

// guardSecret returns configured, or the secret in <data>/<file>,
// generated on first start (mode 0600); env is the variable that sets it
// instead, purpose what it is for (both for the messages).
func guardSecret(configured, dataDir, file, env, purpose string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	path := filepath.Join(dataDir, file)
	b, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s secret file %s cannot be read (%w): fix its permissions, or set %s", purpose, path, err, env)
	}
	if err == nil {
		return "", fmt.Errorf("%s secret file %s is empty: write the secret of the n8n credential into it, or delete it to have one generated", purpose, path)
	}
	var r [24]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	secret := hex.EncodeToString(r[:])
	if err := durable.WriteNew(path, []byte(secret+"\n")); errors.Is(err, fs.ErrExist) {
		return guardSecret("", dataDir, file, env, purpose)
	} else if err != nil {
		return "", fmt.Errorf("store %s secret: %w", purpose, err)
	}
	return secret, nil
}
