package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// serve with a tokens: section: the scoped token works within its scope,
// is refused outside it, and the generated unscoped token of an existing
// install keeps working.
func TestServeWithScopedTokens(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	conf := filepath.Join(dir, "guard.yaml")
	if err := os.WriteFile(conf, []byte("namespaces:\n  crm-contacts: {}\ntokens:\n  team-crm:\n    env: TEAM_CRM_TOKEN\n    role: reserve\n    namespaces: [crm-contacts]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	base := "http://" + addr
	vars := map[string]string{"N8N_GUARD_ADDR": addr, "N8N_GUARD_DATA": data, "N8N_GUARD_CONFIG": conf,
		"TEAM_CRM_TOKEN": "team-crm-secret", "N8N_GUARD_MAX_CONNECTIONS": "64"}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newRootCmd(env(vars), io.Discard, io.Discard)
	cmd.SetArgs([]string{"serve"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop")
		}
	}()
	waitReady(t, base, done)

	if status, a := call(t, base, "team-crm-secret", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt_1"}); status != 200 || a["outcome"] != "accepted" {
		t.Fatalf("in scope: %d %v", status, a)
	}
	if status, a := call(t, base, "team-crm-secret", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "billing", "key": "evt_1"}); status != 403 || a["code"] != "forbidden" {
		t.Fatalf("other namespace: %d %v", status, a)
	}
	if status, a := call(t, base, "team-crm-secret", http.MethodPost, "/v1/resolve", map[string]any{"namespace": "crm-contacts", "key": "evt_1", "resolution": "failed", "by": "me", "note": "n", "force": true}); status != 403 {
		t.Fatalf("admin route: %d %v", status, a)
	}
	admin, err := readToken(filepath.Join(data, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if status, a := call(t, base, admin, http.MethodPost, "/v1/resolve", map[string]any{"namespace": "crm-contacts", "key": "evt_1", "resolution": "failed", "by": "me", "note": "n", "force": true}); status != 200 {
		t.Fatalf("the unscoped token: %d %v", status, a)
	}
}
