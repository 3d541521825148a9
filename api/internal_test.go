package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// Server faults: a 500 internal whose detail says nothing about the
// server, while the error log keeps the cause.
func TestInternalErrorsLeakNothing(t *testing.T) {
	var logs bytes.Buffer
	s := newInternalServer(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	secret := "open /var/lib/n8n-guard/n8n-guard.db: input/output error"
	// Routes of this test only, registered like every other route.
	s.handle(route{method: fiber.MethodGet, path: "/test/fault", scope: access.ScopeAdmin, handle: func(*fiber.Ctx) error {
		return fmt.Errorf("reserve crm/evt_1: %w", errors.New(secret))
	}})
	s.handle(route{method: fiber.MethodGet, path: "/test/panic", scope: access.ScopeAdmin, handle: func(*fiber.Ctx) error { panic(secret) }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	for _, path := range []string{"/test/fault", "/test/panic"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+path, nil)
		req.Header.Set("Authorization", "Bearer t")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var p problem.Problem
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 500 || p.Code != errs.Internal || res.Header.Get("Content-Type") != problem.ContentType {
			t.Fatalf("%s: %d %s", path, res.StatusCode, body)
		}
		if strings.Contains(string(body), "n8n-guard.db") || strings.Contains(string(body), "input/output") {
			t.Fatalf("%s: the answer leaks the cause: %s", path, body)
		}
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "input/output error") {
		t.Fatalf("the cause is not in the error log:\n%s", logs.String())
	}
}

// newInternalServer is a Server on a fresh bbolt store with the token "t",
// for tests that reach inside the package.
func newInternalServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "n8n-guard.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg.Store, cfg.Tokens, cfg.Registry = store, []string{"t"}, prometheus.NewRegistry()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
