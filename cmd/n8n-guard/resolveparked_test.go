package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
)

// `keys resolve` of a parked key whose execution waits in n8n for the
// guard's resume call is refused with the domain's parked_waiting and its
// words (the one rule the API, console and bulk apply), and says --force
// decides it anyway; with --force it is decided.
func TestKeysResolveOfAWaitingParkedKey(t *testing.T) {
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"op-token"}, ResumeOrigins: []string{"http://n8n.local:5678"}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	// Two unreachable writes open hubspot's breaker (the default threshold).
	for _, key := range []string{"L-1", "L-2"} {
		_, a := call(t, base, "op-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": key, "owner": "n8n wf1 exec 9", "destination": "hubspot"})
		call(t, base, "op-token", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm", "key": key, "token": a["token"], "reason": "destination_unreachable"})
	}
	status, a := call(t, base, "op-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "L-3", "owner": "n8n wf1 exec 4711",
		"destination": "hubspot", "resume_url": "http://n8n.local:5678/webhook-waiting/4711"})
	if status != http.StatusOK || a["outcome"] != "parked" {
		t.Fatalf("the third reserve: %d %v, want parked", status, a)
	}
	vars := map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_TOKEN": "op-token"}
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		cmd := newRootCmd(env(vars), &out, &errb)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errb.String(), err
	}
	_, err := run("keys", "resolve", "crm", "L-3", "--completed", "--by", "ann", "--note", "entered by hand")
	if err == nil || !strings.Contains(err.Error(), "parked_waiting") || !strings.Contains(err.Error(), "stop the execution in n8n") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("keys resolve of a waiting parked key: %v, want parked_waiting, what to do, and --force", err)
	}
	if _, rec := call(t, base, "op-token", http.MethodGet, "/v1/keys/crm/L-3", nil); rec["state"] != "parked" {
		t.Fatalf("the refused resolution changed the key: %v", rec["state"])
	}
	out, err := run("keys", "resolve", "crm", "L-3", "--completed", "--by", "ann", "--note", "entered by hand", "--force")
	if err != nil || !strings.Contains(out, "completed") {
		t.Fatalf("keys resolve --force: %v\n%s", err, out)
	}
}
