package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

var updateScrape = flag.Bool("update-scrape", false, "rewrite deploy/monitoring/testdata/guard-start.prom from a fresh guard's first scrape")

// series is one exported series: its metric name and labels, without the
// job and instance labels Prometheus adds.
type series struct {
	name   string
	labels map[string]string
}

func (s series) String() string {
	keys := sortedKeys(s.labels)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, s.labels[k])
	}
	return s.name + "{" + strings.Join(parts, ",") + "}"
}

var seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s*(\S*)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// parseSeries reads `name{a="x", b="y"} value` (the exposition format and
// promtool's input_series alike); job and instance are dropped.
func parseSeries(line string) (series, string, bool) {
	m := seriesLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return series{}, "", false
	}
	s := series{name: m[1], labels: map[string]string{}}
	for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
		if p[1] != "job" && p[1] != "instance" {
			s.labels[p[1]] = p[2]
		}
	}
	return s, m[3], true
}

// guardScrape is the guard's own series in an exposition: series ->
// value, and the metric types.
func guardScrape(text string) (map[string]string, map[string]string) {
	values, types := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		}
		if !strings.HasPrefix(line, "n8n_guard_") {
			continue
		}
		s, v, ok := parseSeries(line)
		if ok {
			values[s.String()] = v
		}
	}
	return values, types
}

// The alert rules see the first event, and their tests are fed what a
// real guard exports. A guard started with the shipped example
// configuration (deploy/compose/n8n-guard.yaml) is scraped once, before any
// use: every counter an alert counts with increase() has its series at 0
// already (a series born at 1 shows no increase), and the scrape is the
// recording in deploy/monitoring/testdata/guard-start.prom (regenerate
// with -update-scrape). Every guard series in alerts_test.yml is one of
// the recording's, or the same series for another destination or
// namespace (one born later, which then starts above 0, as a counter
// born at its first increment does).
func TestMonitoringSeriesAsTheGuardExportsThem(t *testing.T) {
	repo := filepath.Join("..", "..")
	file, err := LoadFile(filepath.Join(repo, "deploy", "compose", "n8n-guard.yaml"))
	if err != nil {
		t.Fatalf("the shipped example configuration: %v", err)
	}
	// crm limited to the namespace that uses it (destinations.crm.namespaces),
	// so that another team's use of it is refused as in production.
	crm := file.Destinations["crm"]
	crm.Namespaces = []string{"crm-contacts"}
	file.Destinations["crm"] = crm
	// With n8n's API, as the compose file runs it: re-runs are on (no
	// grant here, so the fake n8n is never called).
	n8nAPI := httptest.NewServer(http.NotFoundHandler())
	defer n8nAPI.Close()
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"t"}, File: file,
		N8nAPIURL: n8nAPI.URL, N8nAPIKey: "n8n-api-key",
		// One failure report a minute: the second is refused, so the
		// intake's refusal counter (born at its first refusal) is recorded.
		HTTP: api.Limits{IntakePerMinute: 1}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	scrape := func() (map[string]string, map[string]string) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return guardScrape(string(b))
	}
	live, _ := scrape()
	// Then some use: a key whose outcome nobody knows, a wrong token, a
	// team reporting a destination it may not use.
	_, a := call(t, base, "t", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": "evt-1", "destination": "crm"})
	call(t, base, "t", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": "evt-1", "token": a["token"], "reason": "outcome_unknown"})
	call(t, base, "wrong", http.MethodGet, "/v1/keys", nil)
	call(t, base, "t", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "invoices", "key": "evt-2", "destination": "crm"})
	for _, id := range []string{"41", "42"} { // the second is over --intake-per-minute
		call(t, base, "t", http.MethodPost, "/v1/n8n/error", map[string]any{
			"execution": map[string]any{"id": id, "error": map[string]any{"message": "boom"}},
			"workflow":  map[string]any{"id": "w1", "name": "lead to crm"}})
	}
	// The notifications of the unknown key and the failure report are
	// taken from the event log by notify's own loop: wait for both, so the
	// recording does not depend on how fast it ran.
	var used, types map[string]string
	testwait.For(t, "notify accepted the unknown key's and the failure's notifications", func() bool {
		used, types = scrape() // every family's type: the first scrape lacks those born since
		return used[`n8n_guard_notify_accepted_total{kind="key_unknown",status="queued"}`] != "" &&
			used[`n8n_guard_notify_accepted_total{kind="workflow_failed",status="queued"}`] != ""
	})

	dir := filepath.Join(repo, "deploy", "monitoring", "testdata")
	recorded := record(t, filepath.Join(dir, "guard-start.prom"), "a guard's first scrape", live, types)
	recordedUsed := record(t, filepath.Join(dir, "guard-used.prom"), "the same guard's scrape after one unknown key, one wrong token, one refused destination and one refused failure report", used, types)

	// Every counter an alert counts exists at 0 from start.
	rules := alertRules(t, filepath.Join(repo, "deploy", "monitoring", "alerts.yml"))
	counted := regexp.MustCompile(`(?:increase|rate)\((n8n_guard_[a-z0-9_]+)`)
	for alert, expr := range rules {
		for _, c := range counted.FindAllStringSubmatch(expr, -1) {
			n := 0
			for k, v := range live {
				if strings.HasPrefix(k, c[1]+"{") {
					n++
					if v != "0" {
						t.Errorf("alert %s: %s is %s at start, want 0", alert, k, v)
					}
				}
			}
			// A series born at its first increment (a refusal per token) is
			// seen by the rule's second half, `x > 0 unless x offset <window>`.
			if n == 0 && !regexp.MustCompile(`\b`+c[1]+`\b[^)]*> 0 unless `+c[1]+`\b[^)]* offset `).MatchString(expr) {
				t.Errorf("alert %s counts %s, which has no series at start and no `> 0 unless ... offset` half: its first increment would go unseen", alert, c[1])
			}
		}
	}

	// The rule tests' input is what the guard exports.
	raw, err := os.ReadFile(filepath.Join(repo, "deploy", "monitoring", "alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			InputSeries []struct{ Series, Values string } `yaml:"input_series"`
		}
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, tc := range tests.Tests {
		for _, in := range tc.InputSeries {
			s, _, ok := parseSeries(in.Series)
			if !ok || !strings.HasPrefix(s.name, "n8n_guard_") {
				continue
			}
			checked++
			if _, ok := recorded[s.String()]; ok {
				continue
			}
			if _, ok := recordedUsed[s.String()]; ok {
				if types[s.name] == "counter" && startsAtZero(in.Values) {
					t.Errorf("alerts_test.yml feeds %s from 0, but the guard has no such series at start: it is born at its first increment", in.Series)
				}
				continue
			}
			// The same series for a destination or namespace the file does not name.
			var born bool
			for k := range recordedUsed { // a superset of the start's
				r, _, _ := parseSeries(k)
				if r.name != s.name || len(r.labels) != len(s.labels) {
					continue
				}
				same := true
				for l, v := range r.labels {
					w, ok := s.labels[l]
					same = same && ok && (w == v || l == "destination" || l == "namespace")
				}
				born = born || same
			}
			switch {
			case !born:
				t.Errorf("alerts_test.yml feeds %s, which a guard does not export (the recorded series: testdata/guard-*.prom)", in.Series)
			case types[s.name] == "counter" && startsAtZero(in.Values):
				t.Errorf("alerts_test.yml feeds %s from 0, but a series the guard does not have at start is born at its first increment", in.Series)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d input series checked: the test file's shape changed?", checked)
	}
}

// startsAtZero tells whether promtool's values notation starts at 0.
func startsAtZero(values string) bool {
	f := strings.Fields(values)
	return len(f) > 0 && (f[0] == "0" || strings.HasPrefix(f[0], "0+") || strings.HasPrefix(f[0], "0x") || strings.HasPrefix(f[0], "0-"))
}

// record compares a scrape's counters and gauges with the recording at
// path (rewriting it first with -update-scrape) and returns the recording.
func record(t *testing.T, path, what string, live, types map[string]string) map[string]string {
	t.Helper()
	kept := func(k string) bool {
		name, _, _ := strings.Cut(k, "{")
		return types[name] == "counter" || types[name] == "gauge"
	}
	if *updateScrape {
		var out strings.Builder
		fmt.Fprintf(&out, "# The n8n_guard_ series of %s, started with deploy/compose/n8n-guard.yaml\n", what)
		out.WriteString("# (recorded by: go test ./cmd/n8n-guard/ -run TestMonitoringSeriesAsTheGuardExportsThem -update-scrape)\n")
		for _, k := range sortedKeys(live) {
			if kept(k) {
				fmt.Fprintf(&out, "%s %s\n", k, live[k])
			}
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with -update-scrape)", err)
	}
	recorded, _ := guardScrape(string(raw))
	for k := range recorded {
		if _, ok := live[k]; !ok {
			t.Errorf("%s has %s, which the guard no longer exports (-update-scrape)", filepath.Base(path), k)
		}
	}
	for k := range live {
		if _, ok := recorded[k]; !ok && kept(k) {
			t.Errorf("the guard exports %s, which %s lacks (-update-scrape)", k, filepath.Base(path))
		}
	}
	return recorded
}

// alertRules reads the alerts of a rules file: name -> expression.
func alertRules(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// Damaged records and refused requests are seen only in their counters:
// every such family the binary exports (a name ending in _damaged_total
// or refusals_total in its source) is read by some alert.
func TestMonitoringAlertsReadEveryDamageAndRefusalCounter(t *testing.T) {
	repo := filepath.Join("..", "..")
	rules := alertRules(t, filepath.Join(repo, "deploy", "monitoring", "alerts.yml"))
	family := regexp.MustCompile(`"(n8n_guard_[a-z0-9_]*(?:_damaged_total|refusals_total))"`)
	found := map[string]string{}
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range family.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"n8n_guard_records_damaged_total", "n8n_guard_auth_refusals_total"} {
		if found[want] == "" {
			t.Fatalf("%s not found in the source: the search is broken", want)
		}
	}
	for name, where := range found {
		read := false
		for _, expr := range rules {
			read = read || regexp.MustCompile(`\b`+name+`\b`).MatchString(expr)
		}
		if !read {
			t.Errorf("deploy/monitoring/alerts.yml: no alert reads %s (exported by %s)", name, where)
		}
	}
}
