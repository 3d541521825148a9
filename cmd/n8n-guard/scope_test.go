package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
	if err := os.WriteFile(conf, []byte("namespaces:\n  crm-contacts: {}\ntokens:\n  team-crm:\n    env: TEAM_CRM_TOKEN\n    role: reserve\n    namespaces: [crm-contacts]\n  crm-admin:\n    env: CRM_ADMIN_TOKEN\n    role: admin\n    namespaces: [crm-contacts]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	base := "http://" + addr
	vars := map[string]string{"N8N_GUARD_ADDR": addr, "N8N_GUARD_DATA": data, "N8N_GUARD_CONFIG": conf,
		"TEAM_CRM_TOKEN": "team-crm-secret", "CRM_ADMIN_TOKEN": "crm-admin-secret", "N8N_GUARD_MAX_CONNECTIONS": "64"}
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
	// An admin of one namespace may not take the whole store.
	if status, a := call(t, base, "crm-admin-secret", http.MethodGet, "/v1/admin/backup", nil); status != 403 || a["code"] != "forbidden" ||
		!strings.Contains(fmt.Sprint(a["detail"]), "spans every namespace") {
		t.Fatalf("a scoped admin's backup: %d %v", status, a)
	}
	// Nor pause a destination every namespace sends to (a maintenance window).
	hold := map[string]any{"destination": "hubspot", "by": "ops", "reason": "CRM upgrade", "until": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	if status, a := call(t, base, "crm-admin-secret", http.MethodPost, "/v1/destinations/hold", hold); status != 403 || a["code"] != "forbidden" ||
		!strings.Contains(fmt.Sprint(a["detail"]), "spans every namespace") {
		t.Fatalf("a scoped admin's maintenance window: %d %v", status, a)
	}
	// A request_id repeat from another token is a second copy: no token.
	body := map[string]any{"namespace": "crm-contacts", "key": "evt_2", "request_id": "4711/Reserve"}
	if status, a := call(t, base, "team-crm-secret", http.MethodPost, "/v1/reserve", body); status != 200 || a["outcome"] != "accepted" {
		t.Fatalf("reserve: %d %v", status, a)
	}
	if status, a := call(t, base, "crm-admin-secret", http.MethodPost, "/v1/reserve", body); status != 200 || a["outcome"] != "in_progress" || a["token"] != nil {
		t.Fatalf("another token's repeat: %d %v", status, a)
	}
	admin, err := readToken(filepath.Join(data, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if status, a := call(t, base, admin, http.MethodPost, "/v1/resolve", map[string]any{"namespace": "crm-contacts", "key": "evt_1", "resolution": "failed", "by": "me", "note": "n", "force": true}); status != 200 {
		t.Fatalf("the unscoped token: %d %v", status, a)
	}
	// The unscoped token's backup goes on working (bbolt: wired as Backup).
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/admin/backup", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || n == 0 {
		t.Fatalf("the unscoped token's backup: %d, %d bytes", res.StatusCode, n)
	}
	if status, a := call(t, base, admin, http.MethodPost, "/v1/destinations/hold", hold); status != 200 || a["state"] != "open" {
		t.Fatalf("the unscoped token's maintenance window: %d %v", status, a)
	}
}
