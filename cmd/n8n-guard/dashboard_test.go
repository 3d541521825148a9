package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// metricName finds the metric names in a PromQL expression: the guard's
// own, the Go and process collectors', and Prometheus' up.
var metricName = regexp.MustCompile(`\b(n8n_guard_[a-z0-9_]+|go_[a-z0-9_]+|process_[a-z0-9_]+|up)\b`)

// Every query of the Grafana dashboard and every alert rule of
// deploy/monitoring names a metric a running guard really exports: one in
// its /metrics after some use, or (for a labelled counter that has not
// counted anything yet, so has no series) one registered in its registry.
func TestMonitoringPackNamesRealMetrics(t *testing.T) {
	exprs := map[string][]string{} // metric name -> where it is used
	dir := filepath.Join("..", "..", "deploy", "monitoring")

	raw, err := os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	queries := 0
	add := func(where, expr string) {
		queries++
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			exprs[n] = append(exprs[n], where)
		}
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			add("dashboard panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && strings.Contains(q, "(") {
			add("dashboard variable", q)
		}
	}
	raw, err = os.ReadFile(filepath.Join(dir, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add("alert "+r.Alert, r.Expr)
		}
	}
	if queries < 20 {
		t.Fatalf("only %d queries found: the files' shape changed?", queries)
	}

	// A guard with Slack (a fake that accepts), used a little.
	slack := slacktest.New(t)
	n8nAPI := httptest.NewServer(http.NotFoundHandler()) // re-runs on, never called
	defer n8nAPI.Close()
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"t"},
		N8nAPIURL: n8nAPI.URL, N8nAPIKey: "n8n-api-key",
		SlackBotToken: "xoxb-test", SlackAPIURL: slack.APIURL(),
		File: FileConfig{Notify: NotifyConfig{DefaultChannel: "C0ALERTS", GroupWindow: Duration(time.Millisecond)}}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	_, a := call(t, base, "t", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt-1", "destination": "crm"})
	call(t, base, "t", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": "evt-1", "token": a["token"], "reason": "outcome_unknown"})
	call(t, base, "t", http.MethodPost, "/v1/n8n/error", map[string]any{
		"execution": map[string]any{"id": "41", "error": map[string]any{"message": "boom"}},
		"workflow":  map[string]any{"id": "w1", "name": "lead to crm"}})
	call(t, base, "wrong", http.MethodGet, "/v1/keys", nil)

	var scrape string
	testwait.Poll(10*time.Second, func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		scrape = string(b)
		return strings.Contains(scrape, "n8n_guard_notify_delivered_total{")
	})
	var onlyRegistered []string
	for _, name := range sortedKeys(exprs) {
		if name == "up" { // Prometheus' own, per scrape target
			continue
		}
		if strings.Contains(scrape, "\n"+name+"{") || strings.Contains(scrape, "\n"+name+" ") {
			continue
		}
		if registered(m.reg, strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count")) {
			onlyRegistered = append(onlyRegistered, name)
			continue
		}
		t.Errorf("%s (used by %s) is not exported by the guard", name, strings.Join(exprs[name], ", "))
	}
	t.Logf("%d metric names checked; in the registry but without a series yet: %v", len(exprs), onlyRegistered)
}

// registered tells whether reg has a metric of this name: registering
// another one of that name (a valid name, other labels and help) is
// refused only when it does.
func registered(reg *prometheus.Registry, name string) bool {
	probe := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "probe"}, []string{"dashboard_test_probe"})
	err := reg.Register(probe)
	if err == nil {
		reg.Unregister(probe)
		return false
	}
	// "different label names or a different help string": the name is taken.
	return true
}
