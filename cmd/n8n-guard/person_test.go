package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/access"
)

// The operator commands that decide, against a running server: a token
// that names its person decides as that person (the OS user's name the
// command guessed is dropped), a shared token records the named person as
// not verified, and a reset needs a reason; each prints who was recorded.
func TestOperatorDecidesAsAPerson(t *testing.T) {
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"op-token"},
		ScopedTokens: []api.TokenScope{{Name: "ops-ana", SHA256: sha256.Sum256([]byte("ana-token")), Role: access.RoleAdmin, Person: "ana@example.com"}}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	run := func(vars map[string]string, args ...string) (string, error) {
		vars["N8N_GUARD_URL"] = base
		var out, errb bytes.Buffer
		cmd := newRootCmd(env(vars), &out, &errb)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	ana := func() map[string]string { return map[string]string{"N8N_GUARD_TOKEN": "ana-token"} }
	shared := func() map[string]string {
		return map[string]string{"N8N_GUARD_TOKEN": "op-token", "N8N_GUARD_PERSON": "carl"}
	}

	for _, key := range []string{"evt-0", "evt-1"} { // two keys open a destination nobody configured
		status, a := call(t, base, "op-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": key, "destination": "hubspot"})
		if status != http.StatusOK {
			t.Fatalf("reserve: %d %v", status, a)
		}
		if status, _ := call(t, base, "op-token", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm", "key": key,
			"token": a["token"], "reason": "destination_unreachable"}); status != http.StatusOK {
			t.Fatalf("fail: %d", status)
		}
	}

	if _, err := run(ana(), "destinations", "reset", "hubspot"); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("reset without a reason: %v", err)
	}
	if out, _ := run(ana(), "destinations", "list"); !strings.Contains(line(out, "hubspot"), " open ") {
		t.Fatalf("a refused reset closed the breaker:\n%s", out)
	}
	// An explicit by naming someone else is refused, not guessed away.
	if _, err := run(ana(), "destinations", "reset", "hubspot", "--by", "bob", "--reason", "x"); err == nil || !strings.Contains(err.Error(), "token_person") {
		t.Fatalf("reset as someone else: %v", err)
	}
	out, err := run(ana(), "destinations", "reset", "hubspot", "--reason", "CRM confirmed fixed")
	if err != nil || !strings.Contains(out, "recorded as reset by ana@example.com (API token ops-ana) because CRM confirmed fixed") {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	if out, _ := run(ana(), "destinations", "list"); !strings.Contains(line(out, "hubspot"), "by ana@example.com (API token ops-ana) because CRM confirmed fixed") {
		t.Fatalf("the list lacks the reset:\n%s", out)
	}

	status, a := call(t, base, "op-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "evt-2"})
	if status != http.StatusOK {
		t.Fatal(status)
	}
	call(t, base, "op-token", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm", "key": "evt-2", "token": a["token"], "reason": "outcome_unknown"})
	out, err = run(shared(), "keys", "resolve", "crm", "evt-2", "--completed", "--note", "seen in the CRM")
	if err != nil || !strings.Contains(out, "recorded as decided by carl (via shared token token-1)") {
		t.Fatalf("resolve with a shared token: %v\n%s", err, out)
	}
}
