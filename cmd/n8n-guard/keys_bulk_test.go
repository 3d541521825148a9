package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// terminal stands in for a person typing at a terminal.
type terminal struct{ io.Reader }

func (terminal) IsTerminal() bool { return true }

// keys resolve-bulk against a running server: it counts first and asks;
// without a terminal it refuses; a person's "yes" (or --yes) decides, and
// every key's history names the bulk and the person.
func TestKeysResolveBulk(t *testing.T) {
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"op-token"}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	unknown := func(ns, key string) {
		t.Helper()
		status, a := call(t, base, "op-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": ns, "key": key, "owner": "n8n LeadCrm exec 1"})
		if status != http.StatusOK {
			t.Fatalf("reserve %s: %d %v", key, status, a)
		}
		if status, a = call(t, base, "op-token", http.MethodPost, "/v1/fail", map[string]any{"namespace": ns, "key": key, "token": a["token"], "reason": "outcome_unknown"}); status != http.StatusOK {
			t.Fatalf("fail %s: %d %v", key, status, a)
		}
	}
	state := func(ns, key string) (string, map[string]any) {
		t.Helper()
		status, a := call(t, base, "op-token", http.MethodGet, "/v1/keys/"+ns+"/"+key, nil)
		if status != http.StatusOK {
			t.Fatalf("lookup %s: %d", key, status)
		}
		h := a["history"].([]any)
		return a["state"].(string), h[len(h)-1].(map[string]any)
	}
	for i := range 3 {
		unknown("crm", fmt.Sprintf("lead-%d", i))
	}
	unknown("crm", "order-1")
	vars := map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_TOKEN": "op-token"}
	run := func(stdin io.Reader, args ...string) (string, error) {
		var out, errb bytes.Buffer
		cmd := newRootCmd(env(vars), &out, &errb)
		cmd.SetIn(stdin)
		cmd.SetArgs(append([]string{"keys", "resolve-bulk"}, args...))
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	sel := func(extra ...string) []string {
		return append([]string{"--namespace", "crm", "--state", "unknown", "--key-prefix", "lead-", "--resolution", "failed",
			"--by", "ann", "--note", "CRM incident 4711"}, extra...)
	}

	for name, args := range map[string][]string{
		"bad state":     {"--namespace", "crm", "--state", "lost", "--resolution", "failed", "--by", "ann", "--note", "x", "--yes"},
		"no selection":  {"--resolution", "failed", "--by", "ann", "--note", "x", "--yes"},
		"no resolution": {"--namespace", "crm", "--by", "ann", "--note", "x", "--yes"},
		"bad time":      {"--namespace", "crm", "--from", "yesterday", "--resolution", "failed", "--by", "ann", "--note", "x", "--yes"},
	} {
		if _, err := run(strings.NewReader(""), args...); err == nil || strings.Contains(err.Error(), "unknown flag") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The server's rule, not the command's: no selection decides nothing.
	if _, err := run(strings.NewReader(""), "--resolution", "failed", "--by", "ann", "--note", "x", "--yes"); err == nil || !strings.Contains(err.Error(), "never takes every key") {
		t.Errorf("no selection: %v", err)
	}
	out, err := run(strings.NewReader(""), sel("--dry-run")...)
	if err != nil || !strings.Contains(out, "3 keys match; 3 would be decided as failed") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	out, err = run(strings.NewReader("yes\n"), sel()...)
	if err == nil || !strings.Contains(err.Error(), "stdin is not a terminal") || !strings.Contains(out, "3 would be decided") {
		t.Fatalf("without a terminal and --yes: %v\n%s", err, out)
	}
	out, err = run(terminal{strings.NewReader("no\n")}, sel()...)
	if err == nil || !strings.Contains(out, "Decide 3 keys as failed") {
		t.Fatalf("answered no: %v\n%s", err, out)
	}
	if st, _ := state("crm", "lead-0"); st != "unknown" {
		t.Fatalf("decided without a yes: %s", st)
	}
	out, err = run(terminal{strings.NewReader("yes\n")}, sel()...)
	if err != nil || !strings.Contains(out, "decided 3 keys as failed") {
		t.Fatalf("answered yes: %v\n%s", err, out)
	}
	for i := range 3 {
		st, last := state("crm", fmt.Sprintf("lead-%d", i))
		if st != "failed" || last["by"] != "ann (via shared token token-1)" || !strings.HasPrefix(last["detail"].(string), "bulk b-") || !strings.HasSuffix(last["detail"].(string), "failed: CRM incident 4711") {
			t.Fatalf("lead-%d: %s %v", i, st, last)
		}
	}
	if st, _ := state("crm", "order-1"); st != "unknown" {
		t.Fatalf("a key outside the selection was decided: %s", st)
	}
	out, err = run(strings.NewReader(""), "--namespace", "crm", "--text", "RDER", "--resolution", "completed", "--by", "ann", "--note", "found in the CRM", "--yes")
	if err != nil || !strings.Contains(out, "decided 1 keys as completed") {
		t.Fatalf("--yes: %v\n%s", err, out)
	}
	if st, _ := state("crm", "order-1"); st != "completed" {
		t.Fatalf("order-1 after --yes: %s", st)
	}
}
