package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
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

// Defaults of the per-client limits (Config).
const (
	// DefaultClientConnections: connections one client address may hold
	// open before any of them has shown a valid token. n8n's own
	// connections show their token on their first request and stop
	// counting; a flood of idle sockets from one address stops here, far
	// below the global cap, so it cannot take the workflows' slots.
	DefaultClientConnections = 128
	// DefaultUnauthenticatedPerMinute: /v1 requests without a valid token
	// one client may send a minute (in bursts of as many) before it is
	// answered 429 rate_limited and its connection closed.
	DefaultUnauthenticatedPerMinute = 600
	// DefaultSignInPerMinute: console sign-in attempts one client may make
	// a minute (in bursts of as many): a person mistyping is never
	// stopped, guessing tokens is (about 5,000 tries in 25 s before).
	DefaultSignInPerMinute = 10
)

// fairEdge is what keeps one client from taking the server's share of
// others: it knows the trusted proxies (who the client is), counts each
// client's connections that have not authenticated, and rate-limits each
// client's requests without a valid token.
type fairEdge struct {
	proxies     edge.Proxies
	perClient   int // unauthenticated connections per client address; <= 0: no limit
	unauth      *edge.Limiter
	refusals    *prometheus.CounterVec
	log         *slog.Logger
	now         func() time.Time
	connRefusal []byte // the whole answer to a connection over its client's limit

	mu        sync.Mutex
	unproven  map[netip.Addr]int
	lastLog   map[string]time.Time
	sinceLast map[string]int
}

func newFairEdge(cfg Config, log *slog.Logger) (*fairEdge, error) {
	proxies, err := edge.ParseProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	// cfg has its defaults (Config.withDefaults).
	perClient, perMinute := cfg.ClientConnections, cfg.UnauthenticatedPerMinute
	f := &fairEdge{
		proxies: proxies, perClient: perClient, unauth: edge.NewLimiter(perMinute, perMinute), log: log, now: time.Now,
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "n8n_guard_client_limit_refusals_total",
			Help: "Connections and requests refused because one client address was over its own limit (limit: connections, unauthenticated).",
		}, []string{"limit"}),
		unproven: map[netip.Addr]int{}, lastLog: map[string]time.Time{}, sinceLast: map[string]int{},
		connRefusal: rawProblem(problem.RateLimited, "too many connections from your address that have not shown a valid token; close idle ones or send the bearer token", "Retry-After: 1\r\n"),
	}
	for _, l := range []string{"connections", "unauthenticated"} {
		f.refusals.WithLabelValues(l)
	}
	if err := prom.Register(cfg.Registry, f.refusals); err != nil {
		return nil, err
	}
	return f, nil
}

// rawProblem is a whole HTTP answer carrying a problem, for a connection
// answered before fasthttp has read anything from it.
func rawProblem(code errs.Code, detail, extraHeaders string) []byte {
	status := problem.Status(code)
	body := []byte(`{"type":"` + problem.TypeBase + string(code) + `","title":"` + problem.Title(code) +
		`","status":` + strconv.Itoa(status) + `,"detail":"` + detail + `","code":"` + string(code) + `"}`)
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%sConnection: close\r\nContent-Length: %d\r\n\r\n",
		status, http.StatusText(status), problem.ContentType, extraHeaders, len(body))
	return append([]byte(head), body...)
}

// clientAddr is who sent the request (edge.Proxies.Client).
func (f *fairEdge) clientAddr(c *fiber.Ctx) netip.Addr {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	return f.proxies.Client(peer, c.Get(fiber.HeaderXForwardedFor))
}

// admitConn counts a new connection against its client's unauthenticated
// connections; false if the client already holds its share. Connections
// from a trusted proxy carry many clients and are not counted.
func (f *fairEdge) admitConn(peer netip.Addr) (counted, ok bool) {
	if f.perClient < 0 || f.proxies.Trusts(peer) || !peer.IsValid() {
		return false, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unproven[peer] >= f.perClient {
		return false, false
	}
	f.unproven[peer]++
	return true, true
}

// releaseConn gives back a counted connection's place (on its first valid
// token, or when it closes unauthenticated).
func (f *fairEdge) releaseConn(peer netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unproven[peer]--; f.unproven[peer] <= 0 {
		delete(f.unproven, peer)
	}
}

// authenticated marks the request's connection as one that showed a
// valid token: it no longer counts against its client's limit.
func (f *fairEdge) authenticated(c *fiber.Ctx) {
	switch lc := c.Context().Conn().(type) {
	case *limitedConn:
		lc.uncount()
	case *limitedTLSConn:
		lc.uncount()
	}
}

// unauthenticated charges a /v1 request without a valid token to its
// client; over the client's allowance the answer is 429 rate_limited, with
// Retry-After, and the connection is closed.
func (f *fairEdge) unauthenticated(c *fiber.Ctx) error {
	client := f.clientAddr(c)
	ok, wait := f.unauth.Allow(client, f.now())
	if ok {
		return nil
	}
	secs := int(wait.Seconds() + 0.999)
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(max(secs, 1)))
	c.Context().SetConnectionClose()
	f.refused("unauthenticated", "requests refused: one client sends too many requests without a valid token",
		"client", client.String(), "per_minute", f.unauth.PerMinute())
	return errs.Errorf(problem.RateLimited,
		"more than %d requests a minute without a valid token from %s; send Authorization: Bearer <token> (a valid one), or wait %d s",
		f.unauth.PerMinute(), client, max(secs, 1))
}

// refused counts a refusal and logs it at most once a minute per limit.
func (f *fairEdge) refused(limit, msg string, attrs ...any) {
	f.refusals.WithLabelValues(limit).Inc()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sinceLast[limit]++
	if now := f.now(); now.Sub(f.lastLog[limit]) >= time.Minute {
		f.log.Warn(msg, append(attrs, "refused_since_last_log", f.sinceLast[limit])...)
		f.lastLog[limit], f.sinceLast[limit] = now, 0
	}
}
