package n8nsetup

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// leadToCRM is the shipped lead example's id.
const leadToCRM = "n8nGuardLeadCrm1"

// refusedExecution is a failed execution as n8n 2.x stores one whose
// reserve was refused by its SSRF protection (SsrfBlockedIpError wrapped
// by the HTTP Request node; the texts are n8n's).
func refusedExecution(id, workflowID, host, ip string) map[string]any {
	desc := "The target '" + host + "' (" + ip + ") is not allowed. This is a security measure to prevent Server-Side Request Forgery (SSRF). " +
		"If you need to access internal resources, ask your n8n administrator to allowlist the hostname or IP range in the environment configuration."
	nodeErr := map[string]any{
		"message": "The request was blocked because it resolves to a restricted IP address", "description": desc,
		"name": "NodeApiError", "node": map[string]any{"name": "n8n-guard: reserve Create contact", "parameters": map[string]any{"url": "={{ $('Config').item.json.guard_url }}/v1/keys"}},
	}
	return map[string]any{
		"id": id, "workflowId": workflowID, "status": "error", "mode": "webhook",
		"data": map[string]any{"resultData": map[string]any{
			"error":            nodeErr,
			"lastNodeExecuted": "n8n-guard: reserve Create contact",
			"runData": map[string]any{"n8n-guard: reserve Create contact": []any{map[string]any{"error": nodeErr,
				"executionStatus": "error"}}},
		}},
	}
}

// check warns where n8n's SSRF protection (if on: n8n does not say) would
// refuse the guard's address, names the setting that lets it through, and
// takes a failed execution with n8n's refusal of the guard as proof: the
// workflow is then silent (its error handler calls the same refused guard).
func TestCheckWarnsOfN8nsSSRFProtection(t *testing.T) {
	resolver := func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "n8n-guard":
			return []netip.Addr{netip.MustParseAddr("172.18.0.5")}, nil
		case "guard.example.com":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return nil, errors.New("no such host")
	}
	for _, c := range []struct {
		name       string
		guardURL   string
		failed     []map[string]any
		warn, note string // "" for none
		silent     string // "" for no silent workflow
	}{
		{name: "the compose network's address", guardURL: "http://n8n-guard:8080",
			warn: "N8N_SSRF_ALLOWED_HOSTNAMES=n8n-guard"},
		{name: "localhost", guardURL: "http://127.0.0.1:8080",
			warn: "N8N_SSRF_ALLOWED_IP_RANGES=127.0.0.1/32"},
		{name: "a public address", guardURL: "https://guard.example.com"},
		{name: "an address that does not resolve here", guardURL: "http://guard.internal:8080",
			note: "N8N_SSRF_ALLOWED_HOSTNAMES=guard.internal"},
		{name: "a recorded refusal of the guard", guardURL: "http://n8n-guard:8080",
			failed: []map[string]any{refusedExecution("71", leadToCRM, "n8n-guard", "172.18.0.5")},
			warn:   "N8N_SSRF_ALLOWED_HOSTNAMES=n8n-guard", silent: "refused the guard's address http://n8n-guard:8080 (execution 71"},
		{name: "a recorded refusal of another host", guardURL: "http://n8n-guard:8080",
			failed: []map[string]any{refusedExecution("72", leadToCRM, "crm.internal", "10.1.2.3")},
			warn:   "N8N_SSRF_ALLOWED_HOSTNAMES=n8n-guard"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, inst := newInstance(t, 2)
			inst.Resolve = resolver
			in.importShipped(t, workflows.ErrorHandlerID)
			in.importShipped(t, leadToCRM)
			for _, w := range in.wfs {
				workflows.SetConfig(w.Nodes, workflows.GuardURL, c.guardURL)
			}
			in.failed = c.failed
			rep, err := inst.Check(context.Background(), n8n.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			var warns, notes []string
			for _, s := range rep.Steps {
				switch {
				case s.Kind == Warning:
					warns = append(warns, s.Text)
				case s.Kind == Note && strings.Contains(s.Text, "SSRF"):
					notes = append(notes, s.Text)
				}
			}
			if got := strings.Join(warns, "\n"); (c.warn == "") != (got == "") || !strings.Contains(got, c.warn) ||
				(c.warn != "" && !strings.Contains(got, "N8N_SSRF_PROTECTION_ENABLED=true")) {
				t.Errorf("warnings %q, want one saying %q", warns, c.warn)
			}
			if got := strings.Join(notes, "\n"); (c.note == "") != (got == "") || !strings.Contains(got, c.note) {
				t.Errorf("notes %q, want one saying %q", notes, c.note)
			}
			var silent []string
			for _, s := range rep.Silent {
				if strings.Contains(s.Why, "SSRF") {
					silent = append(silent, s.ID+": "+s.Why)
				}
			}
			if got := strings.Join(silent, "\n"); (c.silent == "") != (got == "") || !strings.Contains(got, c.silent) {
				t.Errorf("silent %q, want one saying %q", silent, c.silent)
			}
		})
	}
}

// n8n's refusal is found in each of its wordings, with the target it names.
func TestSSRFRefusalIn(t *testing.T) {
	for _, c := range []struct{ name, data, target string }{
		{"IP error with a hostname", `{"message":"The request was blocked because it resolves to a restricted IP address","description":"The target 'n8n-guard' (172.18.0.5) is not allowed."}`, "n8n-guard"},
		{"IP error, an address", `{"description":"The target 127.0.0.1 is not allowed. ...","name":"SsrfBlockedIpError","ip":"127.0.0.1"}`, "127.0.0.1"},
		{"hostname error", `{"message":"The request was blocked because the destination hostname is restricted","description":"The hostname 'guard.internal' is on the configured blocked hostnames list."}`, "guard.internal"},
		{"the first wording", `{"message":"IP address is blocked","name":"SsrfBlockedIpError","ip":"10.0.0.7"}`, "10.0.0.7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, ok := ssrfRefusalIn(c.data)
			if !ok || r.Target != c.target {
				t.Fatalf("refusal %+v %v, want target %q", r, ok, c.target)
			}
		})
	}
	if _, ok := ssrfRefusalIn(`{"message":"connect ECONNREFUSED 172.18.0.5:8080"}`); ok {
		t.Fatal("a refused connection was taken for n8n's SSRF refusal")
	}
}
