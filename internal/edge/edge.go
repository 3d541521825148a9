// Package edge knows who is at the other end of a connection: the peer
// address, or, behind a reverse proxy the operator trusts, the client that
// proxy names in X-Forwarded-For; and it keeps a rate limit per client.
// The API's fair limits and the console's sign-in limit both use it, so
// both agree on who a client is. It never trusts a forwarded header from a
// peer that is not a configured proxy.
package edge

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Proxies are the addresses (single or CIDR) of reverse proxies whose
// X-Forwarded-For and X-Forwarded-Proto are believed.
type Proxies []netip.Prefix

// ParseProxies reads addresses such as "10.0.0.7", "10.0.0.0/8", "::1".
func ParseProxies(list []string) (Proxies, error) {
	var p Proxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if pre, err := netip.ParsePrefix(s); err == nil {
			p = append(p, pre.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not an IP address or CIDR range", s)
		}
		a = a.Unmap()
		p = append(p, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

// Trusts reports whether a is one of the proxies.
func (p Proxies) Trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, pre := range p {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the address a request comes from. From a trusted proxy it is
// the right-most X-Forwarded-For entry that is not itself a trusted proxy:
// entries further left were written by the client and prove nothing. From
// anyone else the header is ignored.
func (p Proxies) Client(peer netip.Addr, forwardedFor string) netip.Addr {
	peer = peer.Unmap()
	if !p.Trusts(peer) || forwardedFor == "" {
		return peer
	}
	hops := strings.Split(forwardedFor, ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer // a hop we cannot read: stop at the last one we trust
		}
		if a = a.Unmap(); !p.Trusts(a) {
			return a
		}
		peer = a
	}
	return peer
}

// AddrOf is the IP of a net.Addr (a TCP peer); the zero Addr if it has none.
func AddrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// maxClients bounds the clients a Limiter remembers: a flood from many
// addresses must not grow it without end.
const maxClients = 1 << 16

// Limiter allows each client perMinute events a minute, in bursts of up
// to burst.
type Limiter struct {
	perMinute int
	burst     int

	mu       sync.Mutex
	byClient map[netip.Addr]*rate.Limiter
}

// NewLimiter returns a limiter; perMinute <= 0 allows everything.
func NewLimiter(perMinute, burst int) *Limiter {
	return &Limiter{perMinute: perMinute, burst: max(burst, 1), byClient: map[netip.Addr]*rate.Limiter{}}
}

// PerMinute is the configured rate.
func (l *Limiter) PerMinute() int { return l.perMinute }

// Allow takes one event of client at now. When the client has used its
// allowance it returns false and how long until the next one is allowed.
func (l *Limiter) Allow(client netip.Addr, now time.Time) (bool, time.Duration) {
	if l.perMinute <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.byClient[client]
	if lim == nil {
		if len(l.byClient) >= maxClients {
			l.forgetFull(now)
		}
		lim = rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), l.burst)
		l.byClient[client] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// forgetFull drops the clients whose allowance has refilled (they lose
// nothing by being forgotten); if none has, every client is forgotten,
// which a flood from 65,536 addresses earns.
func (l *Limiter) forgetFull(now time.Time) {
	for a, lim := range l.byClient {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.byClient, a)
		}
	}
	if len(l.byClient) >= maxClients {
		clear(l.byClient)
	}
}
