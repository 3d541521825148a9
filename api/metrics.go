package api

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/prom"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// metrics are the server's Prometheus series. They live in the registry
// main passes in; nothing is registered globally.
type metrics struct {
	requests  *prometheus.CounterVec   // route, method, status
	latency   *prometheus.HistogramVec // route, method
	reserves  *prometheus.CounterVec   // namespace, outcome
	fallbacks *prometheus.CounterVec   // namespace
	repeats   *prometheus.CounterVec   // namespace
	byToken   *prometheus.CounterVec   // token, route
	refusals  *prometheus.CounterVec   // token, reason
	approvals *prometheus.CounterVec   // decision (approval.go)

	openConns    prometheus.Gauge
	connsRefused prometheus.Counter

	// The label values that come from requests, bounded.
	namespaces, destinations *labelLimit
}

// labelConfig is what bounds the labels that come from requests.
type labelConfig struct {
	namespaces, destinations []string // configured: always their own series
	limit                    int      // others with their own series
	log                      *slog.Logger
}

func newMetrics(reg prometheus.Registerer, store keystore.Store, lc labelConfig) (*metrics, error) {
	overflow := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "n8n_guard_metric_label_overflow_total",
		Help: "Observations counted under the label value \"other\" because the label had reached its limit of distinct values, by label.",
	}, []string{"label"})
	m := &metrics{
		namespaces:   newLabelLimit("namespace", lc.namespaces, lc.limit, overflow, lc.log),
		destinations: newLabelLimit("destination", lc.destinations, lc.limit, overflow, lc.log),
		repeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_reserve_repeats_total",
			Help: "Reserves answered accepted again with the same token because they repeated a live attempt's request_id (a lost answer, or n8n's Retry On Fail), by namespace.",
		}, []string{"namespace"}),
		byToken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_token_requests_total",
			Help: "Authenticated requests, by the token's configured name (never its value) and route.",
		}, []string{"token", "route"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_auth_refusals_total",
			Help: "Requests refused by authentication (reason unauthorized, token none), by the token's scope (reason scope or namespace) or because by named another person than the token's (reason person), by token name.",
		}, []string{"token", "reason"}),
		openConns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "n8n_guard_open_connections",
			Help: "Client connections open now (including those closing).",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "n8n_guard_connections_refused_total",
			Help: "Connections answered 503 overloaded because the connection cap was reached.",
		}),
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
		approvals: newApprovalsCounter(),
	}
	if err := prom.Register(reg, m.approvals, m.requests, m.latency, m.reserves, m.fallbacks, m.repeats, m.byToken, m.refusals,
		m.openConns, m.connsRefused, overflow, newStoreCollector(store, m.namespaces, m.destinations)); err != nil {
		return nil, err
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

func (m *metrics) reserved(ns string, o keystore.Outcome, repeat bool) {
	ns = m.namespaces.value(ns)
	m.reserves.WithLabelValues(ns, string(o)).Inc()
	if repeat && o == keystore.OutcomeAccepted {
		m.repeats.WithLabelValues(ns).Inc()
	}
}

func (m *metrics) fallbackCompleted(ns string) {
	m.fallbacks.WithLabelValues(m.namespaces.value(ns)).Inc()
}

// refused counts a request refused by auth; token "" is none.
func (m *metrics) refused(token, reason string) {
	if token == "" {
		token = "none"
	}
	m.refusals.WithLabelValues(token, reason).Inc()
}

// storeCollector reads the store's gauges at scrape time, so they are
// never stale and cost nothing between scrapes.
type storeCollector struct {
	store                            keystore.Store
	namespaces, destinations         *labelLimit
	keys, stuck, breaker, paused, up *prometheus.Desc
	// alone: namespaces paused by their own failures while the
	// destination's breaker is closed for the others (breaker_view.go)
	alone *prometheus.Desc
}

func newStoreCollector(store keystore.Store, namespaces, destinations *labelLimit) *storeCollector {
	return &storeCollector{
		store: store, namespaces: namespaces, destinations: destinations,
		keys: prometheus.NewDesc("n8n_guard_keys",
			"Keys stored, by namespace and state.", []string{"namespace", "state"}, nil),
		stuck: prometheus.NewDesc("n8n_guard_stuck_reservations",
			"Keys in state unknown, by namespace: reservations whose outcome nobody knows (lease ran out or outcome_unknown), waiting for a person to resolve them.",
			[]string{"namespace"}, nil),
		breaker: prometheus.NewDesc("n8n_guard_destination_breaker_state",
			"Circuit breaker of a destination: 1 for its current state, 0 for the others (for destination \"other\": how many destinations are in each state).", []string{"destination", "state"}, nil),
		paused: prometheus.NewDesc("n8n_guard_destination_paused_reserves",
			"Reserves answered destination_paused since the breaker last opened.", []string{"destination"}, nil),
		alone: prometheus.NewDesc("n8n_guard_destination_namespaces_paused",
			"Namespaces whose own failures paused their own writes to a destination while its breaker stays closed for the other namespaces (open or half_open for them alone).", []string{"destination"}, nil),
		up: prometheus.NewDesc("n8n_guard_store_up",
			"1 when the store answered the last scrape, 0 when it did not.", nil, nil),
	}
}

func (sc *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sc.keys, sc.stuck, sc.breaker, sc.paused, sc.alone, sc.up} {
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
	// Namespaces and destinations past the label limit are summed into
	// OtherLabel; sorted, so the same ones keep their own series.
	byNS := map[string]map[keystore.State]int{}
	for _, ns := range slices.Sorted(maps.Keys(counts)) {
		label := sc.namespaces.value(ns)
		if byNS[label] == nil {
			byNS[label] = map[keystore.State]int{}
		}
		for st, n := range counts[ns] {
			byNS[label][st] += n
		}
	}
	for ns, byState := range byNS {
		for _, st := range keystore.States {
			ch <- prometheus.MustNewConstMetric(sc.keys, prometheus.GaugeValue, float64(byState[st]), ns, string(st))
		}
		ch <- prometheus.MustNewConstMetric(sc.stuck, prometheus.GaugeValue, float64(byState[keystore.StateUnknown]), ns)
	}
	breakers, err := sc.store.Destinations(ctx)
	if err != nil {
		up = 0
	}
	sort.Slice(breakers, func(i, j int) bool { return breakers[i].Destination < breakers[j].Destination })
	states := map[string]map[keystore.BreakerState]float64{}
	paused, alone := map[string]float64{}, map[string]float64{}
	for _, b := range breakers {
		d := sc.destinations.value(b.Destination)
		if states[d] == nil {
			states[d] = map[keystore.BreakerState]float64{}
		}
		states[d][b.State]++
		paused[d] += float64(b.PausedReserves)
		alone[d] += float64(len(b.Views))
		for _, v := range b.Views {
			paused[d] += float64(v.PausedReserves)
		}
	}
	for d, byState := range states {
		for _, st := range []keystore.BreakerState{keystore.BreakerClosed, keystore.BreakerOpen, keystore.BreakerHalfOpen} {
			ch <- prometheus.MustNewConstMetric(sc.breaker, prometheus.GaugeValue, byState[st], d, string(st))
		}
		ch <- prometheus.MustNewConstMetric(sc.paused, prometheus.GaugeValue, paused[d], d)
		ch <- prometheus.MustNewConstMetric(sc.alone, prometheus.GaugeValue, alone[d], d)
	}
	ch <- prometheus.MustNewConstMetric(sc.up, prometheus.GaugeValue, up)
}
