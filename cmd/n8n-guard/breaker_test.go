package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/logbuf"
)

// breakerGuard serves yaml on data, with the unscoped token "tok" and
// team-crm, a reserve token limited to crm-contacts.
func breakerGuard(t *testing.T, data, yaml string, logs io.Writer) (base string, stop func()) {
	t.Helper()
	fc := writeConfig(t, yaml+"tokens:\n  team-crm:\n    env: TEAM_CRM_TOKEN\n    role: reserve\n    namespaces: [crm-contacts]\n")
	scoped, err := fc.ScopedTokens(env(map[string]string{"TEAM_CRM_TOKEN": "team-crm-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{"tok"}, File: fc, ScopedTokens: scoped},
		slog.New(slog.NewTextHandler(logs, nil)))
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return "http://" + m.Addr(), func() { m.Close() }
}

// A token limited to team-crm's namespace cannot pause the payments
// namespace's destination by itself: one failure is one key, and the same
// key failing again and again adds nothing. Distinct keys (unreachable: 2
// by default) pause team-crm's own writes only, since payments writes
// through the destination too.
func TestOneNamespacesCallerCannotPauseADestinationWithOneKey(t *testing.T) {
	base, stop := breakerGuard(t, t.TempDir(), "", io.Discard)
	defer stop()
	const crm = "team-crm-secret"
	failAgain := func(key, reason string) {
		t.Helper()
		status, a := call(t, base, crm, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": key, "destination": "shared-pay"})
		if status != 200 || a["outcome"] != "accepted" {
			t.Fatalf("team-crm's reserve of %s: %d %v", key, status, a)
		}
		if status, f := call(t, base, crm, http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": key, "token": a["token"], "reason": reason}); status != 200 || f["outcome"] != "destination_failed" {
			t.Fatalf("team-crm's fail of %s: %d %v", key, status, f)
		}
	}
	paymentsReserve := func(key string) string {
		t.Helper()
		_, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "payments", "key": key, "destination": "shared-pay"})
		return fmt.Sprint(a["outcome"])
	}

	failAgain("evt_1", "destination_unreachable")
	if got := paymentsReserve("pay-1"); got != "accepted" {
		t.Fatalf("after one unreachable from team-crm, payments' reserve is %s, want accepted", got)
	}
	for i := 0; i < 6; i++ {
		failAgain("evt_1", "destination_unreachable")
	}
	if got := paymentsReserve("pay-2"); got != "accepted" {
		t.Fatalf("after the same key failed 7 times, payments' reserve is %s, want accepted", got)
	}
	_, d := call(t, base, "tok", http.MethodGet, "/v1/destinations", nil)
	if items, _ := d["items"].([]any); len(items) != 1 || items[0].(map[string]any)["state"] != "closed" || items[0].(map[string]any)["consecutive_failures"] != 1.0 {
		t.Fatalf("destinations %v, want shared-pay closed with one failing key", d)
	}
	// Two distinct keys pause team-crm's own writes, not payments'
	// (keystore/breaker_view.go): payments writes through shared-pay too.
	failAgain("evt_2", "destination_unreachable")
	if got := paymentsReserve("pay-3"); got != "accepted" {
		t.Fatalf("after two of team-crm's keys found it unreachable, payments' reserve is %s, want accepted", got)
	}
	if _, a := call(t, base, crm, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt_3", "destination": "shared-pay"}); a["outcome"] != "destination_paused" || a["paused_for"] != "namespace" {
		t.Fatalf("team-crm's reserve after its two failures: %v, want destination_paused for its namespace", a)
	}
}

// A destination limited to the namespaces that use it refuses the
// others: team-crm's reserve naming it, and its failure report about a key
// recorded before the limit, are 403 forbidden naming why; nothing is
// recorded, the refusal is counted and logged like the token refusals.
func TestAFailureForADestinationLimitedToOtherNamespacesIsForbidden(t *testing.T) {
	data := t.TempDir()
	base, stop := breakerGuard(t, data, "", io.Discard)
	const crm = "team-crm-secret"
	_, legacy := call(t, base, crm, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt_legacy", "destination": "shared-pay"})
	if legacy["outcome"] != "accepted" {
		t.Fatalf("reserve before the limit: %v", legacy)
	}
	stop()

	logs := &logbuf.Buffer{}
	base, stop = breakerGuard(t, data, "destinations:\n  shared-pay:\n    unreachable_threshold: 1\n    namespaces: [payments]\n", logs)
	defer stop()
	_, before := call(t, base, "tok", http.MethodGet, "/v1/keys/crm-contacts/evt_legacy", nil)

	status, p := call(t, base, crm, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt_new", "destination": "shared-pay"})
	wantDestinationRefused(t, "reserve", status, p)
	if _, a := call(t, base, "tok", http.MethodGet, "/v1/lookup?namespace=crm-contacts&key=evt_new", nil); a["found"] != false {
		t.Fatalf("the refused reserve recorded the key: %v", a)
	}
	status, p = call(t, base, crm, http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": "evt_legacy", "token": legacy["token"], "reason": "destination_unreachable"})
	wantDestinationRefused(t, "fail", status, p)
	if _, after := call(t, base, "tok", http.MethodGet, "/v1/keys/crm-contacts/evt_legacy", nil); after["state"] != "reserved" || after["updated_at"] != before["updated_at"] {
		t.Fatalf("the refused fail changed the key: %v, before %v", after, before)
	}
	if _, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "payments", "key": "pay-1", "destination": "shared-pay"}); a["outcome"] != "accepted" {
		t.Fatalf("after the refused failure, payments' reserve: %v", a)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `n8n_guard_auth_refusals_total{reason="destination",token="team-crm"} 2`; !strings.Contains(string(m), want) {
		t.Errorf("metrics lack %s", want)
	}
	if !strings.Contains(logs.String(), "request refused: the destination is limited to other namespaces") || !strings.Contains(logs.String(), "token=team-crm") {
		t.Errorf("the refusals are not logged with the token: %s", logs)
	}
}

func wantDestinationRefused(t *testing.T, what string, status int, p map[string]any) {
	t.Helper()
	fields, _ := p["fields"].([]any)
	if status != http.StatusForbidden || p["code"] != "forbidden" || len(fields) != 1 ||
		fmt.Sprint(fields[0]) != "map[field:destination rule:namespaces]" ||
		!strings.Contains(fmt.Sprint(p["detail"]), "limited to other namespaces") || strings.Contains(fmt.Sprint(p["detail"]), "payments") || p["error"] != nil {
		t.Fatalf("team-crm's %s for shared-pay: %d %v, want 403 forbidden, not naming the namespaces it accepts", what, status, p)
	}
}
