package main

import (
	"strings"
	"testing"
	"time"
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
