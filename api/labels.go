package api

import (
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultLabelLimit is how many distinct values a label that comes from
// requests (namespace, destination) may take, besides the configured
// ones, before further values share OtherLabel.
const DefaultLabelLimit = 50

// OtherLabel is the value every namespace (or destination) past the limit
// shares.
const OtherLabel = "other"

// labelLimit bounds the values of one metric label. A workflow that
// builds its namespace from data (a customer id, a typo in an expression)
// would otherwise add series without end and overload Prometheus.
// Configured values always keep their own series; the first max others
// get theirs; later ones are counted as OtherLabel, with one warning log
// line and a counter of the overflow.
type labelLimit struct {
	name     string
	max      int
	overflow prometheus.Counter
	log      *slog.Logger

	mu     sync.Mutex
	known  map[string]bool // configured, or seen while there was room
	extra  int             // values admitted that were not configured
	warned bool
}

func newLabelLimit(name string, configured []string, max int, overflow *prometheus.CounterVec, log *slog.Logger) *labelLimit {
	l := &labelLimit{name: name, max: max, overflow: overflow.WithLabelValues(name), log: log,
		known: make(map[string]bool, len(configured))}
	for _, v := range configured {
		l.known[v] = true
	}
	return l
}

// value is the label value to use for v.
func (l *labelLimit) value(v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.known[v] {
		return v
	}
	if l.extra < l.max {
		l.extra++
		// A clone: v may point into a buffer fasthttp reuses.
		l.known[strings.Clone(v)] = true
		return v
	}
	l.overflow.Inc()
	if !l.warned {
		l.warned = true
		l.log.Warn("metrics: too many distinct values of a label; further ones are counted as \""+OtherLabel+"\" (configure the ones that matter, or raise the label limit)",
			"label", l.name, "limit", l.max, "first_overflowing", v)
	}
	return OtherLabel
}
