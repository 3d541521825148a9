package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/n8n-guard/n8n-guard/internal/durable"
)

// TokenFile is where the generated API token is kept, inside the data folder.
const TokenFile = "api-token"

// apiTokens returns the tokens the server accepts: those configured, or
// else the one in <data>/api-token, generated on first start. The token
// itself is never logged, only where it is.
func apiTokens(configured []string, dataDir string, log *slog.Logger) ([]string, error) {
	if len(configured) > 0 {
		return configured, nil
	}
	path := filepath.Join(dataDir, TokenFile)
	tok, err := readToken(path)
	if err == nil {
		log.Info("API token read from the data folder", "path", path)
		return []string{tok}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("generate API token: %w", err)
	}
	tok = hex.EncodeToString(b[:])
	err = durable.WriteNew(path, []byte(tok+"\n"))
	if errors.Is(err, fs.ErrExist) {
		// Another process starting at the same moment wrote its token
		// first: use that one.
		tok, err = readToken(path)
		if err != nil {
			return nil, err
		}
		return []string{tok}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store API token: %w", err)
	}
	log.Warn("no N8N_GUARD_TOKENS set: generated an API token; use it as the Bearer token of /v1 requests", "path", path)
	return []string{tok}, nil
}

// readToken reads the token file. One that exists but is empty or
// unreadable stops the start: a new token in its place would lock out
// every workflow that uses the old one.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("API token file %s cannot be read (%w): fix its permissions, or set N8N_GUARD_TOKENS", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("API token file %s exists but is empty: write the token your workflows use into it, or delete it to have a new one generated", path)
	}
	return tok, nil
}

// checkDataDir warns where the data folder's modes let other users in:
// a folder they may write to (they could replace the store or a secret),
// or a secret or the store readable by them. A folder others may only
// list is not warned about: its files are created 0600, and an image's
// volume (scratch, one user) or a StateDirectory is often 0755. Existing
// modes are the operator's to change.
func checkDataDir(dir string, log *slog.Logger) {
	fi, err := os.Stat(dir)
	if err != nil || runtime.GOOS == "windows" {
		return
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		log.Warn("other users may write to the data folder; it holds the API token and the records: chmod 700 it",
			"path", dir, "mode", fmt.Sprintf("%#o", perm))
	}
	for _, name := range []string{TokenFile, ResumeSecretFile, ConsoleKeyFile, ConsoleSignOutFile, StoreFile} {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			log.Warn("a file of the data folder is open to other users: chmod 600 it",
				"path", path, "mode", fmt.Sprintf("%#o", perm))
		}
	}
}
