package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The destination commands against a running server: hold a destination
// for a window, see the window and the parked event, end the window; the
// catch-up then calls the parked execution's resume URL, which n8n (a
// fake that answers 404, as for a pruned execution) no longer holds, and
// the listing marks the event LOST with what to do.
func TestDestinationCommands(t *testing.T) {
	pruned := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"code":404,"message":"The execution \"81\" does not exist."}`))
	}))
	defer pruned.Close()
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"op-token"}, ResumeSecret: "s3cret", N8nURL: pruned.URL}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	vars := map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_TOKEN": "op-token"}
	run := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		cmd := newRootCmd(env(vars), &out, &errb)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), errb.String(), err
	}

	// Bad input: refused before or by the server, nothing held.
	for _, args := range [][]string{
		{"destinations", "hold", "hubspot", "--for", "1h", "--by", "ops"},                                                     // no reason
		{"destinations", "hold", "hubspot", "--by", "ops", "--reason", "upgrade"},                                             // no end
		{"destinations", "hold", "hubspot", "--for", "1h", "--until", "2099-01-01T00:00:00Z", "--by", "ops", "--reason", "x"}, // both
		{"destinations", "hold", "hubspot", "--until", "tomorrow", "--by", "ops", "--reason", "upgrade"},
		{"destinations", "hold", "hubspot", "--for", "1000h", "--by", "ops", "--reason", "upgrade"}, // over 30 days
	} {
		if _, _, err := run(args...); err == nil {
			t.Fatalf("%v: accepted", args)
		}
	}
	if out, _, err := run("destinations", "list"); err != nil || strings.Contains(out, "hubspot") {
		t.Fatalf("a refused hold left something: %v\n%s", err, out)
	}

	out, _, err := run("destinations", "hold", "hubspot", "--for", "2h", "--by", "ops: ana", "--reason", "HubSpot upgrade OPS-12")
	if err != nil || !strings.Contains(out, "hubspot is paused until") {
		t.Fatalf("hold: %v\n%s", err, out)
	}
	status, a := call(t, base, "op-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "evt-1",
		"destination": "hubspot", "resume_url": pruned.URL + "/webhook-waiting/81", "owner": "n8n exec 81"})
	if status != http.StatusOK || a["outcome"] != "parked" {
		t.Fatalf("reserve in the window: %d %v", status, a)
	}
	out, _, err = run("destinations", "list")
	if err != nil || !strings.Contains(out, "hubspot") || !strings.Contains(out, "by ops: ana (via shared token token-1): HubSpot upgrade OPS-12") {
		t.Fatalf("destinations list: %v\n%s", err, out)
	}
	if row := line(out, "hubspot"); !strings.Contains(row, " open ") || !strings.Contains(row, " 1 ") {
		t.Fatalf("destinations list row %q: want open with 1 parked", row)
	}
	out, _, err = run("destinations", "parked", "hubspot")
	if row := line(out, "evt-1"); err != nil || !strings.Contains(row, "WAITING") || !strings.Contains(row, "/webhook-waiting/81") {
		t.Fatalf("parked: %v\n%s", err, out)
	}
	if out, _, err = run("destinations", "parked", "salesforce"); err != nil || strings.Contains(out, "evt-1") {
		t.Fatalf("parked of another destination: %v\n%s", err, out)
	}

	if _, _, err = run("destinations", "end-hold", "hubspot", "--by", "ops"); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("end-hold without a reason: %v", err)
	}
	if out, _, _ = run("destinations", "list"); !strings.Contains(out, "HubSpot upgrade") {
		t.Fatalf("a refused end-hold ended the window:\n%s", out)
	}
	out, _, err = run("destinations", "end-hold", "hubspot", "--by", "ops: ana", "--reason", "upgrade done early")
	if err != nil || !strings.Contains(out, "has ended") {
		t.Fatalf("end-hold: %v\n%s", err, out)
	}
	// The catch-up resumes the event as the probe; n8n answers 404.
	var errOut string
	if !testwait.PollEvery(20*time.Second, 200*time.Millisecond, func() bool {
		var err error
		if out, errOut, err = run("destinations", "parked"); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(line(out, "evt-1"), "LOST")
	}) {
		t.Fatalf("the event was not marked lost:\n%s", out)
	}
	if !strings.Contains(errOut, "n8n-guard keys resolve") {
		t.Fatalf("a lost event without the next step: %q", errOut)
	}
	if out, _, _ = run("destinations", "list"); strings.Contains(out, "HubSpot upgrade") {
		t.Fatalf("the window is still listed after its end:\n%s", out)
	}
}

func TestParkedStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	for _, tc := range []struct {
		name string
		r    keystore.Record
		want string
	}{
		{"just parked", keystore.Record{ParkedAt: at(time.Minute)}, "WAITING"},
		{"parked past the limit", keystore.Record{ParkedAt: at(73 * time.Hour)}, "OVERDUE"},
		{"n8n lost it", keystore.Record{ParkedAt: at(time.Minute), Reason: keystore.ReasonResumeLost}, "LOST"},
		{"lost and old", keystore.Record{ParkedAt: at(100 * time.Hour), Reason: keystore.ReasonResumeLost}, "LOST"},
		{"resumed", keystore.Record{ParkedAt: at(time.Minute), ResumeSentAt: at(0)}, "RESUMED"},
	} {
		tc.r.State = keystore.StateParked
		if got := parkedStatus(keystore.WordsOf(&tc.r, keystore.WordsAt{ParkedLimit: keystore.DefaultParkedLimit, Now: now})); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// line is the first line of out that contains s.
func line(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// A destination paused for one namespace alone is listed closed, with a
// line under it for that namespace (keystore/breaker_view.go).
func TestDestinationsListSaysANamespaceIsPausedAlone(t *testing.T) {
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"op-token"}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	reserve := func(ns, key string) map[string]any {
		t.Helper()
		status, a := call(t, base, "op-token", http.MethodPost, "/v1/reserve", map[string]any{"namespace": ns, "key": key, "destination": "ledger"})
		if status != http.StatusOK || a["outcome"] != "accepted" {
			t.Fatalf("reserve %s/%s: %d %v", ns, key, status, a)
		}
		return a
	}
	a := reserve("payments", "pay-1")
	call(t, base, "op-token", http.MethodPost, "/v1/complete", map[string]any{"namespace": "payments", "key": "pay-1", "token": a["token"]})
	for _, key := range []string{"evt-1", "evt-2"} {
		a := reserve("crm-contacts", key)
		if status, f := call(t, base, "op-token", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": key, "token": a["token"], "reason": "destination_unreachable"}); status != http.StatusOK {
			t.Fatalf("fail %s: %d %v", key, status, f)
		}
	}
	var out, errb bytes.Buffer
	cmd := newRootCmd(env(map[string]string{"N8N_GUARD_URL": base, "N8N_GUARD_TOKEN": "op-token"}), &out, &errb)
	cmd.SetArgs([]string{"destinations", "list"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("destinations list: %v\n%s", err, errb.String())
	}
	if row := line(out.String(), "ledger"); !strings.Contains(row, " closed ") {
		t.Fatalf("destinations list row %q: want closed (for the other namespaces)\n%s", row, out.String())
	}
	if row := line(out.String(), "namespace crm-contacts"); !strings.Contains(row, "open for it alone") {
		t.Fatalf("no line says crm-contacts is paused alone:\n%s", out.String())
	}
}
