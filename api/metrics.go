package api

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// metrics are the server's Prometheus series. They live in the registry
// main passes in; nothing is registered globally.
type metrics struct {
	requests  *prometheus.CounterVec   // route, method, status
	latency   *prometheus.HistogramVec // route, method
	reserves  *prometheus.CounterVec   // namespace, outcome
	fallbacks *prometheus.CounterVec   // namespace
}

func newMetrics(reg prometheus.Registerer, store keystore.Store) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_http_requests_total",
			Help: "HTTP requests answered, by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "n8n_guard_http_request_duration_seconds",
			Help:    "Time from reading a request to writing its answer, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method"}),
		reserves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_reserve_outcomes_total",
			Help: "Answers of POST /v1/reserve, by namespace and outcome.",
		}, []string{"namespace", "outcome"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_fallback_completions_total",
			Help: "Keys completed with via=fallback, by namespace.",
		}, []string{"namespace"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.reserves, m.fallbacks, newStoreCollector(store)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// route returns the observer of one route, with its labels bound once.
func (m *metrics) route(path, method string) func(status int, took time.Duration) {
	requests := m.requests.MustCurryWith(prometheus.Labels{"route": path, "method": method})
	latency := m.latency.WithLabelValues(path, method)
	return func(status int, took time.Duration) {
		requests.WithLabelValues(strconv.Itoa(status)).Inc()
		latency.Observe(took.Seconds())
	}
}

// observe counts a request no route answered.
// methodLabel returns a constant label for an HTTP method. fiber's method
// string points into a buffer fasthttp reuses for the next request: stored
// as a label it would change under the registry's feet and break /metrics.
func methodLabel(m string) string {
	switch m {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "HEAD":
		return "HEAD"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "PATCH":
		return "PATCH"
	case "OPTIONS":
		return "OPTIONS"
	}
	return "other"
}

func (m *metrics) observe(path, method string, status int, took time.Duration) {
	m.requests.WithLabelValues(path, method, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(path, method).Observe(took.Seconds())
}

func (m *metrics) reserved(ns string, o keystore.Outcome) {
	m.reserves.WithLabelValues(ns, string(o)).Inc()
}

func (m *metrics) fallbackCompleted(ns string) { m.fallbacks.WithLabelValues(ns).Inc() }

// storeCollector reads the store's gauges at scrape time, so they are
// never stale and cost nothing between scrapes.
type storeCollector struct {
	store                            keystore.Store
	keys, stuck, breaker, paused, up *prometheus.Desc
}

func newStoreCollector(store keystore.Store) *storeCollector {
	return &storeCollector{
		store: store,
		keys: prometheus.NewDesc("n8n_guard_keys",
			"Keys stored, by namespace and state.", []string{"namespace", "state"}, nil),
		stuck: prometheus.NewDesc("n8n_guard_stuck_reservations",
			"Keys in state unknown, by namespace: reservations whose outcome nobody knows (lease ran out or outcome_unknown), waiting for a person to resolve them.",
			[]string{"namespace"}, nil),
		breaker: prometheus.NewDesc("n8n_guard_destination_breaker_state",
			"Circuit breaker of a destination: 1 for its current state, 0 for the others.", []string{"destination", "state"}, nil),
		paused: prometheus.NewDesc("n8n_guard_destination_paused_reserves",
			"Reserves answered destination_paused since the breaker last opened.", []string{"destination"}, nil),
		up: prometheus.NewDesc("n8n_guard_store_up",
			"1 when the store answered the last scrape, 0 when it did not.", nil, nil),
	}
}

func (sc *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sc.keys, sc.stuck, sc.breaker, sc.paused, sc.up} {
		ch <- d
	}
}

func (sc *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	up := 1.0
	counts, err := sc.store.Counts(ctx)
	if err != nil {
		up = 0
	}
	for ns, byState := range counts {
		for _, st := range keystore.States {
			ch <- prometheus.MustNewConstMetric(sc.keys, prometheus.GaugeValue, float64(byState[st]), ns, string(st))
		}
		ch <- prometheus.MustNewConstMetric(sc.stuck, prometheus.GaugeValue, float64(byState[keystore.StateUnknown]), ns)
	}
	breakers, err := sc.store.Destinations(ctx)
	if err != nil {
		up = 0
	}
	for _, b := range breakers {
		for _, st := range []keystore.BreakerState{keystore.BreakerClosed, keystore.BreakerOpen, keystore.BreakerHalfOpen} {
			v := 0.0
			if b.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(sc.breaker, prometheus.GaugeValue, v, b.Destination, string(st))
		}
		ch <- prometheus.MustNewConstMetric(sc.paused, prometheus.GaugeValue, float64(b.PausedReserves), b.Destination)
	}
	ch <- prometheus.MustNewConstMetric(sc.up, prometheus.GaugeValue, up)
}
