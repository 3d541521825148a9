package api_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
)

// fasthttp reuses its request buffers; a method string kept as a metric
// label changed under the registry and broke every later scrape.
func TestMetricsSurviveUnmatchedRequests(t *testing.T) {
	e := start(t)
	e.unrecorded = true
	for i := 0; i < 3; i++ {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut} {
			e.call(t, m, "/no-such-route", nil)
			e.call(t, m, "/v1/keys-nope", nil)
		}
		e.call(t, http.MethodPost, "/healthz", nil)
		e.call(t, http.MethodDelete, "/v1/keys", nil)
	}
	for i := 0; i < 3; i++ {
		r := e.get(t, "/metrics")
		if r.Status != http.StatusOK {
			t.Fatalf("scrape %d: %d %s", i, r.Status, r.Body)
		}
		if !strings.Contains(string(r.Body), `route="unmatched"`) {
			t.Fatalf("no unmatched requests counted:\n%s", r.Body)
		}
	}
}

// A workflow that builds its namespace from data invents a new one per
// event. 5,000 of them (a reserve each, some with a destination of their
// own) leave /metrics small: past the label limit they share "other",
// with one warning and an overflow count, while the configured namespace
// keeps its own series.
func TestInventedNamespacesLeaveMetricsSmall(t *testing.T) {
	var logs logbuf.Buffer
	e := start(t, withAPI(api.Config{
		Namespaces: []string{"crm-contacts"}, Destinations: []string{"crm-4990"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}))
	e.unrecorded = true
	const invented, clients = 5000, 8
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < invented; i += clients {
				body := obj{"namespace": fmt.Sprintf("customer-%d", i), "key": "evt_1"}
				if i%10 == 0 {
					body["destination"] = fmt.Sprintf("crm-%d", i)
				}
				r := e.post(t, "/v1/reserve", body)
				if r.Status != http.StatusOK {
					t.Errorf("reserve %d: %s", i, r)
					return
				}
				if body["destination"] != nil { // a breaker of its own
					e.post(t, "/v1/fail", obj{"namespace": body["namespace"], "key": "evt_1", "token": r.JSON(t)["token"],
						"reason": "destination_failed"})
				}
			}
		})
	}
	wg.Wait()
	tok := e.accepted(t, "evt_configured")
	wantOK(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "evt_configured", "token": tok}), "completed")
	m := e.callWith(t, http.MethodGet, "/metrics", nil, nil)
	if m.Status != http.StatusOK {
		t.Fatalf("%s", m)
	}
	t.Logf("/metrics after %d invented namespaces: %d bytes", invented, len(m.Body))
	if len(m.Body) >= 100<<10 {
		t.Fatalf("/metrics is %d bytes, want under 100 KB", len(m.Body))
	}
	for _, want := range []string{
		`n8n_guard_reserve_outcomes_total{namespace="crm-contacts",outcome="accepted"} 1`,
		`n8n_guard_reserve_outcomes_total{namespace="other",outcome="accepted"}`,
		`n8n_guard_keys{namespace="crm-contacts",state="completed"} 1`,
		`n8n_guard_keys{namespace="other",state="reserved"}`,
		`n8n_guard_destination_breaker_state{destination="crm-4990",state="closed"} 1`,
		`n8n_guard_destination_breaker_state{destination="other",state="closed"} 449`,
		`n8n_guard_metric_label_overflow_total{label="namespace"}`,
	} {
		if !strings.Contains(string(m.Body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Every key is still counted: the sum over namespaces is all of them.
	var total int
	for _, line := range strings.Split(string(m.Body), "\n") {
		var n int
		if strings.HasPrefix(line, "n8n_guard_keys{") && strings.Contains(line, `state="reserved"`) {
			fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%d", &n)
			total += n
		}
	}
	if total != invented-invented/10 {
		t.Errorf("reserved keys in /metrics: %d, want %d", total, invented+1)
	}
	if n := strings.Count(logs.String(), "too many distinct values"); n != 2 {
		t.Errorf("%d overflow warnings, want one per label (namespace, destination):\n%.2000s", n, logs.String())
	}
}
