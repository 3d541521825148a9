package main

import (
	"bytes"
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// A key reads the same in the console and in the CLI: a parked key
// waiting for its destination, one awaiting a person's approval and one
// whose re-run a person allowed and n8n started. Each is read from one
// running guard over loopback, by `n8n-guard keys show` and by the
// console's key page; the CLI's status, reason and next step must be on
// the page word for word, and say what the key's stage is.
func TestConsoleAndCLISayAKeyInTheSameWords(t *testing.T) {
	ns := httptest.NewServer(gatedN8n())
	defer ns.Close()
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"tok"},
		ResumeOrigins: []string{"http://n8n.local"},
		N8nAPIURL:     ns.URL + "/api/v1", N8nAPIKey: "n8n-api-key",
		File: writeConfig(t, `
namespaces:
  invoices:
    approval: required
    approvers: [U0ANA]
`)}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	must := func(what string, status int, body map[string]any, want int) {
		t.Helper()
		if status != want {
			t.Fatalf("%s: %d %v", what, status, body)
		}
	}

	// Parked: its destination is held for a maintenance window.
	st, b := call(t, base, "tok", http.MethodPost, "/v1/destinations/hold", map[string]any{"destination": "hubspot", "by": "ops", "reason": "upgrade", "until": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)})
	must("hold", st, b, http.StatusOK)
	st, b = call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "evt-1", "destination": "hubspot",
		"resume_url": "http://n8n.local/webhook-waiting/81", "owner": "n8n exec 81"})
	must("parked reserve", st, b, http.StatusOK)
	// Awaiting approval.
	st, b = call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "invoices", "key": "inv-1",
		"resume_url": "http://n8n.local/webhook-waiting/91", "owner": "n8n exec 91", "fingerprint": "inv-1", "summary": "invoice 1 over 10,000"})
	must("approval reserve", st, b, http.StatusOK)
	// A failed write whose execution stops at its re-run gate; a person
	// allows the re-run, and the guard asks n8n, which starts it.
	const holder = "n8n wf-crm exec 42"
	st, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "lead-1", "owner": holder})
	must("reserve", st, a, http.StatusOK)
	st, b = call(t, base, "tok", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm", "key": "lead-1", "token": a["token"], "reason": "destination_failed"})
	must("fail", st, b, http.StatusOK)
	st, b = call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "lead-1", "owner": holder, "rerun": true})
	must("the gate", st, b, http.StatusConflict)
	st, b = call(t, base, "tok", http.MethodPost, "/v1/resolve", map[string]any{"namespace": "crm", "key": "lead-1", "resolution": "failed", "by": "ana", "note": "CRM is back", "rerun": true})
	must("grant", st, b, http.StatusOK)

	vars := map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_TOKEN": "tok"}
	// cli runs keys show and returns the words it printed by line name.
	cli := func(ns, key string) map[string]string {
		t.Helper()
		var out, errb bytes.Buffer
		cmd := newRootCmd(env(vars), &out, &errb)
		cmd.SetArgs([]string{"keys", "show", ns, key})
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("keys show %s %s: %v\n%s", ns, key, err, errb.String())
		}
		words := map[string]string{}
		for _, line := range strings.Split(errb.String(), "\n") {
			if name, text, ok := strings.Cut(line, ": "); ok {
				words[name] = text
			}
		}
		return words
	}
	testwait.For(t, "n8n to start the granted re-run", func() bool { return cli("crm", "lead-1")["status"] == "re-run started in n8n" })

	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(base+"/ui/signin", url.Values{"token": {"tok"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookies []*http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Value != "" {
			cookies = append(cookies, ck)
		}
	}
	if len(cookies) == 0 {
		t.Fatalf("no session from the console's sign-in: %d", resp.StatusCode)
	}
	tags, space := regexp.MustCompile(`<[^>]*>`), regexp.MustCompile(`\s+`)
	// console reads the key's page as a person reads it: its text.
	console := func(ns, key string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/ui/key?"+url.Values{"namespace": {ns}, "key": {key}}.Encode(), nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("console key page %s/%s: %d\n%s", ns, key, resp.StatusCode, raw)
		}
		return space.ReplaceAllString(html.UnescapeString(tags.ReplaceAllString(string(raw), " ")), " ")
	}

	for _, tc := range []struct {
		name, ns, key string
		status        string // what the stage is, in words
		reason        bool   // the key has a reason to say
	}{
		{"parked, waiting for its destination", "crm", "evt-1", "waiting for the destination", false},
		{"awaiting approval", "invoices", "inv-1", "awaiting approval", true},
		{"re-run granted and started", "crm", "lead-1", "re-run started in n8n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			words, page := cli(tc.ns, tc.key), console(tc.ns, tc.key)
			if words["status"] != tc.status || words["next step"] == "" || (words["reason"] != "") != tc.reason {
				t.Fatalf("the CLI says %q, want status %q with a next step (reason: %v)", words, tc.status, tc.reason)
			}
			for _, name := range []string{"status", "reason", "next step"} {
				if w := words[name]; w != "" && !strings.Contains(page, w) {
					t.Errorf("the CLI's %s %q is not on the console's page:\n%s", name, w, page)
				}
			}
		})
	}
}

// gatedN8n answers n8n's public API as n8n does for execution 42 of
// workflow wf-crm, which reserved crm/lead-1 and stopped at its re-run
// gate: its data, no retry of it yet, and a retry that starts as 57.
func gatedN8n() http.Handler {
	const gate = "n8n-guard: re-run gate for Create contact"
	execution := `{"id":"42","status":"error","workflowId":"wf-crm","data":{"resultData":{"lastNodeExecuted":"` + gate + `","error":{"message":"Conflict"},
		"runData":{"n8n-guard: reserve Create contact":[{"data":{"main":[[{"json":{"statusCode":200,"body":{"outcome":"accepted","proceed":true,"namespace":"crm","key":"lead-1","token":"t"}}}]]}}],
		"` + gate + `":[{"error":{"message":"409"}}]}}}}`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/executions/42":
			io.WriteString(w, execution)
		case "POST /api/v1/executions/42/retry":
			io.WriteString(w, `{"id":"57","mode":"retry","status":"running"}`)
		case "GET /api/v1/executions", "GET /api/v1/workflows":
			io.WriteString(w, `{"data":[],"nextCursor":null}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"Not Found"}`)
		}
	})
}
