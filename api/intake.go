package api

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/edge"
	"github.com/n8n-guard/n8n-guard/internal/prom"
)

// DefaultIntakePerMinute: failures one token may report a minute on
// /v1/n8n/error (in bursts of as many) before it is answered 429. Each
// accepted failure may become a Slack message; without a bound one
// reserve token sent 2,000 made-up failures and Slack got 671 messages in
// 101 s. 120 a minute (2 a second, sustained) is above what one n8n's
// error workflow sends outside a mass failure, and the shipped error
// workflow sends a refused one again (Retry On Fail, 5 times, 5 s apart).
const DefaultIntakePerMinute = 120

// intakeLimit bounds the failures each token reports: a token bucket per
// token (its configured name), on the server's clock.
type intakeLimit struct {
	limiter  *edge.Keyed[string]
	refusals *prometheus.CounterVec // token
	log      *slog.Logger
	now      func() time.Time

	mu        sync.Mutex
	lastLog   map[string]time.Time
	sinceLast map[string]int
}

func newIntakeLimit(perMinute int, reg *prometheus.Registry, log *slog.Logger, now func() time.Time) (*intakeLimit, error) {
	l := &intakeLimit{
		limiter: edge.NewKeyed[string](perMinute, perMinute), log: log, now: now,
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_intake_refusals_total",
			Help: "Failures refused on /v1/n8n/error (429 rate_limited) because one token reported more than its limit a minute, by the token's configured name (never its value).",
		}, []string{"token"}),
		lastLog: map[string]time.Time{}, sinceLast: map[string]int{},
	}
	if err := prom.Register(reg, l.refusals); err != nil {
		return nil, err
	}
	return l, nil
}

// admit charges one failure report to the calling token; over the
// token's allowance the answer is 429 rate_limited with Retry-After, the
// refusal is counted, and one line a minute per token says so. Other
// tokens are not charged.
func (l *intakeLimit) admit(c *fiber.Ctx) error {
	token := tokenName(c.UserContext())
	ok, wait := l.limiter.Allow(token, l.now())
	if ok {
		return nil
	}
	secs := max(int(wait.Seconds()+0.999), 1)
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	l.refusals.WithLabelValues(token).Inc()
	l.logRefusal(token)
	return errs.Errorf(problem.RateLimited,
		"token %s reported more than %d failures a minute; nothing was recorded for this one: send it again in %d s (n8n's error workflow does, with its Retry On Fail)",
		token, l.limiter.PerMinute(), secs)
}

// logRefusal logs at most one line a minute per token.
func (l *intakeLimit) logRefusal(token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sinceLast[token]++
	if now := l.now(); now.Sub(l.lastLog[token]) >= time.Minute {
		l.log.Warn("failure intake: one token reports more failures than its limit; the extra ones are refused (429)",
			"token", token, "per_minute", l.limiter.PerMinute(), "refused_since_last_log", l.sinceLast[token])
		l.lastLog[token], l.sinceLast[token] = now, 0
	}
}
