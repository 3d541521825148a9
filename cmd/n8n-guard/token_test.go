package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestTokenFile(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Run("first start writes the whole token, mode 0600, and no temporary file is left", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		toks, err := apiTokens(nil, dir, log)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, TokenFile))
		if err != nil || string(b) != toks[0]+"\n" || len(toks[0]) != 64 {
			t.Fatalf("token file %q (%v), token %q", b, err, toks[0])
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Fatalf("data folder holds %v, want only %s", entries, TokenFile)
		}
		if runtime.GOOS != "windows" {
			fi, _ := os.Stat(filepath.Join(dir, TokenFile))
			di, _ := os.Stat(dir)
			if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
				t.Fatalf("token file %v, data folder %v; want 0600 and 0700", fi.Mode().Perm(), di.Mode().Perm())
			}
		}
		again, err := apiTokens(nil, dir, log)
		if err != nil || again[0] != toks[0] {
			t.Fatalf("second start: %v %v", again, err)
		}
	})
	t.Run("two processes starting at once agree on one token", func(t *testing.T) {
		dir := t.TempDir()
		got := make([]string, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				toks, err := apiTokens(nil, dir, log)
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = toks[0]
			})
		}
		wg.Wait()
		for _, tok := range got {
			if tok != got[0] {
				t.Fatalf("different tokens: %v", got)
			}
		}
	})
	for name, prepare := range map[string]func(path string) error{
		"an empty token file stops the start":      func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"a blank token file stops the start":       func(p string) error { return os.WriteFile(p, []byte(" \n"), 0o600) },
		"an unreadable token file stops the start": func(p string) error { return os.Mkdir(p, 0o700) }, // a folder cannot be read as a file
		"a token file without permission stops it": func(p string) error { return os.WriteFile(p, []byte("tok\n"), 0o000) },
	} {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(name, "permission") && (runtime.GOOS == "windows" || os.Geteuid() == 0) {
				t.Skip("root (or Windows) reads any file")
			}
			dir := t.TempDir()
			path := filepath.Join(dir, TokenFile)
			if err := prepare(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			_, err := apiTokens(nil, dir, log)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("started anyway (or the error does not name the file): %v", err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Fatalf("the token file was replaced")
			}
		})
	}
	t.Run("serve refuses to start on an empty token file and says why", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, TokenFile), nil, 0o600)
		m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: dir}, nil)
		err := m.Run(context.Background())
		if err == nil {
			m.Close()
			t.Fatal("started")
		}
		if !strings.Contains(err.Error(), "exists but is empty") {
			t.Fatalf("unclear: %v", err)
		}
	})
	t.Run("a data folder open to others is warned about where it matters", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("no Unix modes")
		}
		for _, tc := range []struct {
			name       string
			dir, token os.FileMode
			want       string // "": no warning
		}{
			{"private folder and token", 0o700, 0o600, ""},
			{"folder others may list, private token (an image's volume)", 0o755, 0o600, ""},
			{"folder others may write to", 0o777, 0o600, "chmod 700"},
			{"token others may read", 0o755, 0o644, "chmod 600"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte("t\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				os.Chmod(filepath.Join(dir, TokenFile), tc.token)
				os.Chmod(dir, tc.dir)
				var logs bytes.Buffer
				checkDataDir(dir, slog.New(slog.NewTextHandler(&logs, nil)))
				switch {
				case tc.want == "" && logs.Len() != 0:
					t.Fatalf("warned: %q", logs.String())
				case tc.want != "" && !strings.Contains(logs.String(), tc.want):
					t.Fatalf("no %q warning: %q", tc.want, logs.String())
				}
			})
		}
	})
}
