//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPublicWebhookURLPrivateGuard proves, with the shipped lead workflow
// in a real n8n, that n8n's WEBHOOK_URL may be a public address the guard
// never calls. n8n's WEBHOOK_URL names a trap (standing for the public
// proxy: it counts every request and answers 503); the guard is given it
// as N8N_WEBHOOK_URL and reaches n8n at N8N_API_URL, its private address.
// Leads park behind a CRM outage with resume URLs on the trap's origin;
// when the CRM is back every lead is written exactly once, and the trap
// was never called: each resume call went to the private address.
func TestPublicWebhookURLPrivateGuard(t *testing.T) {
	s := newBareSuite(t, 90*time.Second, ", WEBHOOK_URL public, the guard calls n8n privately")
	// A new connection per call: Node closes an idle keep-alive connection
	// after 5 s, and a POST that races that close is reset, not retried.
	s.web = &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var trapped atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trapped.Add(1)
		t.Logf("the public address was called: %s %s", r.Method, r.URL.Path)
		http.Error(w, "the public address is not for the guard", http.StatusServiceUnavailable)
	}))
	t.Cleanup(trap.Close)
	public := "http://localhost:" + trap.URL[strings.LastIndex(trap.URL, ":")+1:] + "/"
	private := fmt.Sprintf("http://127.0.0.1:%d", s.n8nPort)

	var err error
	if s.guard, err = startGuard(s.guardBin, s.work, guardConfig, guardToken, s.slack.APIURL(),
		"N8N_WEBHOOK_URL="+public, "N8N_API_URL="+private); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.guard.Stop)
	files, err := s.shippedFiles(s.guard.URL())
	if err != nil {
		t.Fatal(err)
	}
	only := map[string][]byte{}
	for name, b := range files {
		if strings.HasPrefix(name, "shipped-") {
			only[name] = b
		}
	}
	activate := []string{"n8nGuardLeadCrm1"}
	if s.install.Major() >= 2 {
		activate = append(activate, errorWorkflow)
	}
	s.startN8N(t, map[string]string{"WEBHOOK_URL": public}, only, activate, []string{leadPath}, false)

	keys := []string{"evt-public-1", "evt-public-2", "evt-public-3", "evt-public-4"}
	s.crm.Refuse()
	s.sendQueued(t, keys[:1]) // finds the CRM down: opens the breaker
	s.sendQueued(t, keys[1:])
	for _, k := range keys {
		rec := s.lookup(t, "crm-contacts", k)
		if rec.State != "parked" || !strings.HasPrefix(rec.ResumeURL, public+"webhook-waiting/") {
			t.Fatalf("%s: record %+v, want parked with a resume URL on n8n's public address %s", k, rec, public)
		}
	}
	if err := s.crm.Accept(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.waitCompleted(t, keys, 90*time.Second)
	t.Logf("FIGURE %d leads parked with resume URLs on %s caught up through %s %.1f s after the CRM came back",
		len(keys), public, private, time.Since(start).Seconds())
	s.exactlyOnce(t, keys)
	if n := trapped.Load(); n != 0 {
		t.Fatalf("the public address (n8n's WEBHOOK_URL) was called %d times, want never", n)
	}
}
