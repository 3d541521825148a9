package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/n8n"
)

func TestCheckConfig(t *testing.T) {
	fc, err := ParseFile(strings.NewReader(`
checks:
  lead-check:
    url: http://n8n:5678/webhook/n8n-guard-lead-check
    timeout: 5s
    tries: 2
namespaces:
  crm-contacts:
    check: lead-check
destinations:
  hubspot:
    check: lead-check
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := fc.Policies()
	if err != nil {
		t.Fatal(err)
	}
	if p.CheckFor("crm-contacts", "") != "lead-check" || p.CheckFor("other", "hubspot") != "lead-check" || p.CheckFor("other", "mail") != "" {
		t.Fatalf("checks not mapped: %+v", p)
	}
	if c := fc.Checks["lead-check"]; time.Duration(c.Timeout) != 5*time.Second || c.Tries != 2 {
		t.Fatalf("check = %+v", c)
	}
	for _, c := range []struct{ yaml, want string }{
		{"namespaces:\n  a:\n    check: nope\n", `namespaces.a.check: "nope" is not an entry of checks:`},
		{"destinations:\n  a:\n    check: nope\n", `destinations.a.check: "nope" is not an entry of checks:`},
		{"checks:\n  c:\n    url: ftp://x/y\n", "checks.c.url"},
		{"checks:\n  c:\n    url: http://n8n/webhook/x\n    tries: 11\n", "checks.c.tries"},
		{"checks:\n  c:\n    url: http://n8n/webhook/x\n    timeout: 10m\n", "checks.c.timeout"},
		{"checks:\n  c:\n    url: http://n8n/webhook/x\n    header: \"X Bad\"\n", "checks.c.header"},
		{"checks:\n  c:\n    url: http://n8n/webhook/x\n    tiemout: 1s\n", "tiemout"},
	} {
		if _, err := ParseFile(strings.NewReader(c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one with %q", c.yaml, err, c.want)
		}
	}
}

// The guard's calls to a check carry the check secret (header
// X-N8n-Guard-Check, <data>/check-secret), never the resume secret that
// wakes parked executions: one leaked credential does not open the other.
func TestCheckCallsCarryTheCheckSecretNotTheResumeSecret(t *testing.T) {
	type seen struct{ check, resume string }
	calls := make(chan seen, 10)
	check := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls <- seen{r.Header.Get("X-N8n-Guard-Check"), r.Header.Get("X-N8n-Guard-Resume")}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"result":"absent"}`)
	}))
	defer check.Close()
	data := t.TempDir()
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{"tok"},
		File: writeConfig(t, "checks:\n  lead-check:\n    url: "+check.URL+"/webhook/lead-check\nnamespaces:\n  crm-contacts:\n    check: lead-check\n")}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	_, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt_1"})
	call(t, base, "tok", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": "evt_1", "token": a["token"], "reason": "outcome_unknown"})

	var got seen
	select {
	case got = <-calls:
	case <-time.After(15 * time.Second):
		t.Fatal("the check was not called")
	}
	checkSecret, err := readToken(filepath.Join(data, n8n.CheckSecretFile))
	if err != nil {
		t.Fatal(err)
	}
	resumeSecret, err := readToken(filepath.Join(data, ResumeSecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if got.check == "" || got.check != checkSecret || got.check == resumeSecret || got.resume != "" {
		t.Fatalf("the check call carried X-N8n-Guard-Check %q and X-N8n-Guard-Resume %q; want the check secret (%d bytes, not the resume secret) and no resume header",
			got.check, got.resume, len(checkSecret))
	}
	if info, err := os.Stat(filepath.Join(data, n8n.CheckSecretFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the check secret file: %v %v, want mode 0600", info, err)
	}
}
