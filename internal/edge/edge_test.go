package edge

import (
	"net/netip"
	"testing"
	"time"
)

func TestClient(t *testing.T) {
	p, err := ParseProxies([]string{"10.0.0.7", "192.168.0.0/16", " ", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer, xff, want string
	}{
		{"no proxy: the peer", "203.0.113.9", "", "203.0.113.9"},
		{"a stranger's X-Forwarded-For is ignored", "203.0.113.9", "198.51.100.1", "203.0.113.9"},
		{"through the trusted proxy", "10.0.0.7", "198.51.100.1", "198.51.100.1"},
		{"a client cannot pose as another by prepending", "10.0.0.7", "1.2.3.4, 198.51.100.1", "198.51.100.1"},
		{"two trusted hops", "10.0.0.7", "198.51.100.1, 192.168.4.4", "198.51.100.1"},
		{"only trusted hops: the left-most of them", "10.0.0.7", "192.168.4.4", "192.168.4.4"},
		{"an unreadable hop stops the walk", "10.0.0.7", "198.51.100.1, garbage", "10.0.0.7"},
		{"trusted proxy without the header", "10.0.0.7", "", "10.0.0.7"},
		{"IPv6 loopback proxy", "::1", "2001:db8::5", "2001:db8::5"},
		{"IPv4-mapped peer is the IPv4 proxy", "::ffff:10.0.0.7", "198.51.100.1", "198.51.100.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Client(netip.MustParseAddr(tc.peer), tc.xff); got != netip.MustParseAddr(tc.want) {
				t.Fatalf("Client(%s, %q) = %s, want %s", tc.peer, tc.xff, got, tc.want)
			}
		})
	}
	if _, err := ParseProxies([]string{"proxy.internal"}); err == nil {
		t.Fatal("a host name must be refused: only addresses are trusted")
	}
	var none Proxies
	if got := none.Client(netip.MustParseAddr("10.0.0.7"), "198.51.100.1"); got.String() != "10.0.0.7" {
		t.Fatalf("no proxies configured: %s", got)
	}
}

func TestLimiter(t *testing.T) {
	l := NewLimiter(60, 3) // one a second, bursts of 3
	a, b := netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2")
	now := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := l.Allow(a, now); !ok {
			t.Fatalf("burst event %d refused", i)
		}
	}
	ok, wait := l.Allow(a, now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("fourth at once: %v, wait %v", ok, wait)
	}
	if ok, _ := l.Allow(b, now); !ok {
		t.Fatal("another client pays for the first")
	}
	if ok, _ := l.Allow(a, now.Add(time.Second)); !ok {
		t.Fatal("a second later one more is allowed")
	}
	if ok, _ := l.Allow(a, now.Add(time.Second)); ok {
		t.Fatal("refused events must not have been counted as allowance")
	}
	if ok, _ := NewLimiter(0, 0).Allow(a, now); !ok {
		t.Fatal("a zero rate is no limit")
	}
}

func TestLimiterForgetsWithinBounds(t *testing.T) {
	l := NewLimiter(60, 1)
	now := time.Unix(1000, 0)
	base := netip.MustParseAddr("10.0.0.0").As4()
	for i := range maxClients + 10 {
		ip := base
		ip[1], ip[2], ip[3] = byte(i>>16), byte(i>>8), byte(i)
		l.Allow(netip.AddrFrom4(ip), now)
	}
	if n := len(l.byKey); n > maxClients {
		t.Fatalf("%d clients remembered, bound %d", n, maxClients)
	}
}
