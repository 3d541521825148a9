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

// Limiter allows each client address perMinute events a minute, in
// bursts of up to burst.
type Limiter = Keyed[netip.Addr]

// NewLimiter returns a limiter of client addresses; perMinute <= 0 allows
// everything.
func NewLimiter(perMinute, burst int) *Limiter { return NewKeyed[netip.Addr](perMinute, burst) }

// Keyed allows each key (a client address, an API token) perMinute
// events a minute, in bursts of up to burst: one token bucket per key.
type Keyed[K comparable] struct {
	perMinute int
	burst     int

	mu    sync.Mutex
	byKey map[K]*rate.Limiter
}

// NewKeyed returns a limiter; perMinute <= 0 allows everything.
func NewKeyed[K comparable](perMinute, burst int) *Keyed[K] {
	return &Keyed[K]{perMinute: perMinute, burst: max(burst, 1), byKey: map[K]*rate.Limiter{}}
}

// PerMinute is the configured rate.
func (l *Keyed[K]) PerMinute() int { return l.perMinute }

// Allow takes one event of key at now. When the key has used its
// allowance it returns false and how long until the next one is allowed.
func (l *Keyed[K]) Allow(key K, now time.Time) (bool, time.Duration) {
	if l.perMinute <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.byKey[key]
	if lim == nil {
		if len(l.byKey) >= maxClients {
			l.forgetFull(now)
		}
		lim = rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), l.burst)
		l.byKey[key] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// forgetFull drops the keys whose allowance has refilled (they lose
// nothing by being forgotten); if none has, every key is forgotten,
// which a flood from 65,536 addresses earns.
func (l *Keyed[K]) forgetFull(now time.Time) {
	for a, lim := range l.byKey {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.byKey, a)
		}
	}
	if len(l.byKey) >= maxClients {
		clear(l.byKey)
	}
}
