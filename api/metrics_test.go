package api_test

import (
	"net/http"
	"strings"
	"testing"
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
