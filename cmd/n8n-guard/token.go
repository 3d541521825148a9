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
	"strings"
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
	// O_EXCL: of two processes starting at once, only one writes the token.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store API token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("store API token: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("store API token: %w", err)
	}
	log.Warn("no N8N_GUARD_TOKENS set: generated an API token; use it as the Bearer token of /v1 requests", "path", path)
	return []string{tok}, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("API token file %s is empty", path)
	}
	return tok, nil
}
