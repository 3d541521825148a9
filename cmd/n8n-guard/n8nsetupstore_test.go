package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// fakeN8N is the little of n8n 2.x's public API setup uses: its version,
// workflows (saved and published) and credentials, kept as sent.
type fakeN8N struct {
	mu    sync.Mutex
	next  int
	wfs   []map[string]any
	creds []map[string]any
}

func (n *fakeN8N) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	body := func() map[string]any {
		m := map[string]any{}
		_ = json.NewDecoder(r.Body).Decode(&m)
		return m
	}
	wf := func(id string) map[string]any {
		for _, w := range n.wfs {
			if w["id"] == id {
				return w
			}
		}
		return map[string]any{}
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v1")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case r.URL.Path == "/rest/settings":
		reply(map[string]any{"data": map[string]any{"versionCli": "2.41.1"}})
	case r.Method == http.MethodGet && path == "/workflows":
		reply(map[string]any{"data": n.wfs, "nextCursor": nil})
	case r.Method == http.MethodPost && path == "/workflows":
		m := body()
		n.next++
		m["id"], m["versionId"] = fmt.Sprintf("W%d", n.next), fmt.Sprintf("v%d", n.next)
		n.wfs = append(n.wfs, m)
		reply(m)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "workflows":
		reply(wf(parts[1]))
	case r.Method == http.MethodPut && len(parts) == 2 && parts[0] == "workflows":
		m, b := wf(parts[1]), body()
		n.next++
		for k, v := range b {
			m[k] = v
		}
		m["versionId"] = fmt.Sprintf("v%d", n.next)
		if m["active"] == true && r.URL.Query().Get("publishIfActive") == "true" {
			m["activeVersionId"] = m["versionId"]
		}
		reply(m)
	case r.Method == http.MethodPost && len(parts) == 3 && (parts[2] == "publish" || parts[2] == "activate"):
		m := wf(parts[1])
		m["active"], m["activeVersionId"] = true, m["versionId"]
		reply(m)
	case r.Method == http.MethodGet && path == "/credentials":
		reply(map[string]any{"data": n.creds, "nextCursor": nil})
	case r.Method == http.MethodPost && path == "/credentials":
		m := body()
		n.next++
		c := map[string]any{"id": fmt.Sprintf("C%d", n.next), "name": m["name"], "type": m["type"]}
		n.creds = append(n.creds, c)
		reply(c)
	default:
		w.WriteHeader(http.StatusNotFound)
		reply(map[string]any{"message": "not found"})
	}
}

// On Kubernetes the setup Job may be given a database it cannot reach (the
// Secret's sample N8N_GUARD_STORE with the bbolt StatefulSet, or the
// database down). The resume and check secrets are then not found: setup
// says WARNING for each, naming it, the error and the variable that gives
// it, and still does everything else: the API-token credential and the
// error handler, made every workflow's error workflow.
func TestSetupGoesOnWhenTheStoreCannotBeRead(t *testing.T) {
	fake := &fakeN8N{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	store := "postgres://n8n_guard:replace@127.0.0.1:1/n8n_guard?sslmode=disable&connect_timeout=1"
	var out bytes.Buffer
	cmd := newRootCmd(env(map[string]string{
		"N8N_URL":         srv.URL,
		"N8N_API_KEY":     "key",
		"N8N_GUARD_TOKEN": "the-guards-token",
	}), &out, io.Discard)
	cmd.SetArgs([]string{"n8n", "setup", "--guard-url", "http://n8n-guard:8080", "--create-credential",
		"--store", store, "--data", t.TempDir()})
	err := cmd.Execute()
	s := out.String()
	t.Log("\n" + s)
	if err != nil {
		t.Fatalf("setup aborts on a store it cannot read: %v", err)
	}
	for _, spec := range []sharedSecret{resumeSecretSpec, checkSecretSpec} {
		found := false
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, "WARNING:") && strings.Contains(line, spec.Name) && strings.Contains(line, spec.Env) && strings.Contains(line, "127.0.0.1:1") {
				found = true
			}
		}
		if !found {
			t.Errorf("no WARNING naming %s, the store's error and %s", spec.Name, spec.Env)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	var creds []string
	for _, c := range fake.creds {
		creds = append(creds, fmt.Sprint(c["name"]))
	}
	if len(creds) != 1 || creds[0] != workflows.CredentialName {
		t.Errorf("credentials created: %q, want only %q", creds, workflows.CredentialName)
	}
	if len(fake.wfs) != 1 || fake.wfs[0]["activeVersionId"] == nil {
		t.Errorf("the error handler is not installed and published: %d workflow(s)", len(fake.wfs))
	}
}
