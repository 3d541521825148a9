package notify

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/prom"
)

type metrics struct {
	accepted    *prometheus.CounterVec
	delivered   *prometheus.CounterVec
	dead        *prometheus.CounterVec
	slackCalls  *prometheus.CounterVec
	waiting     prometheus.Gauge
	breakerOpen prometheus.Gauge
	escalated   prometheus.Counter
	resent      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_notify_accepted_total",
			Help: "Notifications accepted into the outbox, by kind and status (queued: new message, grouped: joined an open group).",
		}, []string{"kind", "status"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_notify_delivered_total",
			Help: "Notifications Slack accepted, by kind.",
		}, []string{"kind"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_notify_dead_total",
			Help: "Notifications given up (permanent Slack error or too many attempts), by kind.",
		}, []string{"kind"}),
		slackCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_notify_slack_calls_total",
			Help: "Slack Web API calls, by method and result.",
		}, []string{"method", "result"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "n8n_guard_notify_waiting",
			Help: "Notifications with a Slack call due (new messages and count updates).",
		}),
		breakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "n8n_guard_notify_slack_breaker_open",
			Help: "1 from the moment Slack was found unreachable until a call gets through again.",
		}),
		escalated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "n8n_guard_notify_escalations_total",
			Help: "Escalation steps taken: a message nobody acknowledged was sent to the next step of its rule.",
		}),
		resent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "n8n_guard_notify_resent_total",
			Help: "Dead notifications queued again by an operator (CLI or API).",
		}),
	}
	// Every kind's series at 0 from start: an alert's increase() counts
	// the first delivery or death, which it cannot on a series born at 1.
	for _, k := range kinds() {
		m.delivered.WithLabelValues(string(k))
		m.dead.WithLabelValues(string(k))
	}
	if err := prom.Register(reg, m.accepted, m.delivered, m.dead, m.slackCalls, m.waiting, m.breakerOpen,
		m.escalated, m.resent); err != nil {
		return nil, err
	}
	return m, nil
}
