package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// A sharedSecret is a secret every replica of the guard must hold the
// same. It comes from its variable (a Kubernetes Secret, compose's .env)
// when that is set; else on PostgreSQL from the database (the first
// replica keeps one, the others read it: guard_shared_secrets); else from
// the data folder (bbolt: one process), made on first start.
type sharedSecret struct {
	// Name is its file in the data folder and its row in the database.
	Name string
	// Env is the variable that gives it.
	Env string
	// parse turns the variable's text into the secret.
	parse func(string) ([]byte, error)
	// make makes a new one.
	make func() ([]byte, error)
	// folder reads (or makes) the data folder's copy, for bbolt.
	folder func(dataDir string, log *slog.Logger) ([]byte, error)
	// text: the file holds a line of text (trimmed), not raw bytes.
	text bool
}

// consoleKeySecret seals the console's session cookies: replicas that
// disagree sign people out at random (no sticky sessions).
var consoleKeySecret = sharedSecret{
	Name: ConsoleKeyFile,
	Env:  "N8N_GUARD_CONSOLE_SESSION_KEY",
	parse: func(s string) ([]byte, error) {
		b, err := hex.DecodeString(strings.TrimSpace(s))
		if err != nil || len(b) != console.SessionKeySize {
			return nil, fmt.Errorf("N8N_GUARD_CONSOLE_SESSION_KEY: want %d bytes in hex (openssl rand -hex %d)", console.SessionKeySize, console.SessionKeySize)
		}
		return b, nil
	},
	make: func() ([]byte, error) {
		b := make([]byte, console.SessionKeySize)
		_, err := rand.Read(b)
		return b, err
	},
	folder: consoleSessionKey,
}

// resumeSecretSpec is the header credential of the resume calls: n8n's
// Wait-node credential holds one value, so replicas that disagree have
// their resumes refused by n8n.
var resumeSecretSpec = sharedSecret{
	Name:  ResumeSecretFile,
	Env:   "N8N_GUARD_RESUME_SECRET",
	parse: func(s string) ([]byte, error) { return []byte(strings.TrimSpace(s)), nil },
	make: func() ([]byte, error) {
		var r [24]byte
		_, err := rand.Read(r[:])
		return []byte(hex.EncodeToString(r[:])), err
	},
	folder: func(dataDir string, _ *slog.Logger) ([]byte, error) {
		s, err := resumeSecret("", dataDir)
		return []byte(s), err
	}, text: true,
}

// checkSecretSpec is the header credential of the calls to checks, a
// secret of its own (one per purpose): n8n's check credential holds one
// value, so replicas that disagree have their checks refused.
var checkSecretSpec = sharedSecret{
	Name:  n8n.CheckSecretFile,
	Env:   "N8N_GUARD_CHECK_SECRET",
	parse: resumeSecretSpec.parse,
	make:  resumeSecretSpec.make,
	folder: func(dataDir string, _ *slog.Logger) ([]byte, error) {
		s, err := checkSecret("", dataDir)
		return []byte(s), err
	},
	text: true,
}

// secret resolves s for this guard: configured (its variable's value)
// when given, else the database's on PostgreSQL, else the data folder's.
// A single guard moving to several keeps its secret: its data folder's
// copy is the candidate the database keeps when it holds none yet.
func (m *Main) secret(ctx context.Context, s sharedSecret, configured string) ([]byte, error) {
	if strings.TrimSpace(configured) != "" {
		return s.parse(configured)
	}
	pg := m.pg
	if pg == nil {
		return s.folder(m.Config.DataDir, m.Logger)
	}
	path := filepath.Join(m.Config.DataDir, s.Name)
	local, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.text {
		local = bytes.TrimSpace(local)
	}
	candidate := local
	if len(candidate) == 0 {
		if candidate, err = s.make(); err != nil {
			return nil, err
		}
	}
	kept, err := pg.SharedSecret(ctx, s.Name, candidate)
	if err != nil {
		return nil, err
	}
	switch {
	case len(local) > 0 && !bytes.Equal(kept, local):
		m.Logger.Warn("the data folder's copy of a shared secret differs from the database's and is ignored: every replica uses the database's",
			"secret", s.Name, "file", path, "variable", s.Env)
	case bytes.Equal(kept, candidate):
		m.Logger.Info("a shared secret was kept in the database for every replica", "secret", s.Name, "variable", s.Env)
	}
	return kept, nil
}
