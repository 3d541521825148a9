package api

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/valyala/fasthttp"

	"github.com/n8n-guard/n8n-guard/internal/edge"
)

// DefaultMaxConnections caps open client connections. Each costs about
// 20 KiB while idle or slow (goroutine, read and write buffers); bodies
// are bounded separately (headerReceived). 4096 keeps a flood of slow
// clients far below 256 MiB and leaves room for the real ones.
const DefaultMaxConnections = 4096

// unauthBodyLimit is the most the server reads of a /v1 request whose
// token is not valid: enough that a small request with a wrong token gets
// its 401 on a connection that stays usable, too little to cost memory.
const unauthBodyLimit = 4 << 10

// lingerTimeout and lingerBytes bound what a closing connection still
// reads (see lingerClose).
const (
	lingerTimeout = 2 * time.Second
	lingerBytes   = 1 << 20
)

// headerReceived decides, once a request's header is read and before any
// of its body is, how much body the server will read: none beyond
// unauthBodyLimit on /v1 without a valid token, else the body limit. A
// Content-Length over the limit is refused there and then (413, or 401
// without a token: see the app's ErrorHandler); the body is never read.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	path, _, _ := bytes.Cut(h.RequestURI(), []byte("?"))
	if !s.needsToken(string(path)) {
		return fasthttp.RequestConfig{}
	}
	if _, ok := s.tokens.find(string(h.Peek(fasthttp.HeaderAuthorization))); !ok {
		return fasthttp.RequestConfig{MaxRequestBodySize: unauthBodyLimit}
	}
	return fasthttp.RequestConfig{}
}

// needsToken tells whether a request to path must carry a bearer token:
// every /v1 path but those registered open.
func (s *Server) needsToken(path string) bool {
	return strings.HasPrefix(path, "/v1/") && !s.openPaths[path]
}

// connLimit is a listener that holds at most max connections open. One
// over the cap is answered 503 overloaded at once and closed; the refusal
// is counted, and logged at most once a minute. Before the cap, each
// client's share is checked (fair.go): a connection from an address that
// already holds its share of unauthenticated connections is answered 429
// rate_limited and closed, and never takes a slot.
type connLimit struct {
	net.Listener
	slots   chan struct{}
	metrics *metrics
	log     *slog.Logger
	refusal []byte
	fair    *fairEdge

	mu         sync.Mutex
	lastLog    time.Time
	sinceLog   int
	maxAllowed int
}

func newConnLimit(ln net.Listener, max int, m *metrics, log *slog.Logger, fair *fairEdge) *connLimit {
	body := []byte(`{"type":"` + problem.TypeBase + string(problem.Overloaded) + `","title":"` + problem.Title(problem.Overloaded) +
		`","status":503,"detail":"the server has reached its connection limit; retry shortly","code":"` + string(problem.Overloaded) + `"}`)
	head := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + problem.ContentType +
		"\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	return &connLimit{Listener: ln, slots: make(chan struct{}, max), metrics: m, log: log,
		refusal: append([]byte(head), body...), maxAllowed: max, fair: fair}
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer := edge.AddrOf(c.RemoteAddr())
		counted, ok := l.fair.admitConn(peer)
		if !ok {
			l.fair.refused("connections", "connections refused: one client holds its share of connections without a valid token (see client connections)",
				"client", peer.String(), "client_connections", l.fair.perClient)
			if _, ok := c.(*tls.Conn); ok {
				go answerAndClose(c, l.fair.connRefusal) // a handshake first: never in the accept loop
			} else {
				answerAndClose(c, l.fair.connRefusal)
			}
			continue
		}
		select {
		case l.slots <- struct{}{}:
			l.metrics.openConns.Inc()
			lc := &limitedConn{Conn: c, release: l.release, fair: l.fair, peer: peer}
			lc.counted.Store(counted)
			if tc, ok := c.(*tls.Conn); ok {
				return &limitedTLSConn{lc, tc}, nil
			}
			return lc, nil
		default:
			if counted {
				l.fair.releaseConn(peer)
			}
			if _, ok := c.(*tls.Conn); ok {
				// The answer needs a handshake first: never in the accept loop.
				go l.refuse(c)
				continue
			}
			l.refuse(c)
		}
	}
}

func (l *connLimit) release() {
	l.metrics.openConns.Dec()
	<-l.slots
}

// refuse answers a connection over the cap without reading its request.
// The write cannot block the accept loop: a fresh socket's send buffer
// holds the few hundred bytes.
func (l *connLimit) refuse(c net.Conn) {
	l.metrics.connsRefused.Inc()
	answerAndClose(c, l.refusal)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sinceLog++
	if time.Since(l.lastLog) >= time.Minute {
		l.log.Warn("connections refused: the connection cap is reached (see max connections)",
			"max_connections", l.maxAllowed, "refused_since_last_log", l.sinceLog)
		l.lastLog, l.sinceLog = time.Now(), 0
	}
}

// answerAndClose writes a prepared answer to a connection whose request
// is not read, and closes it.
func answerAndClose(c net.Conn, answer []byte) {
	c.SetDeadline(time.Now().Add(100 * time.Millisecond)) // over TLS, the write reads the handshake first
	c.Write(answer)
	c.Close()
}

// limitedConn gives its slot back once, when it is really closed, and its
// place among its client's unauthenticated connections at its first valid
// token or at the close, whichever comes first.
type limitedConn struct {
	net.Conn
	release func()
	once    sync.Once
	fair    *fairEdge
	peer    netip.Addr
	counted atomic.Bool // still counted among the peer's unauthenticated connections
}

// uncount takes the connection out of its client's unauthenticated
// connections: at its first valid token, or when it closes.
func (c *limitedConn) uncount() {
	if c.counted.CompareAndSwap(true, false) {
		c.fair.releaseConn(c.peer)
	}
}

// limitedTLSConn is a limitedConn over TLS (serve --tls-cert, --acme-domain).
// fasthttp tells TLS from these two methods: requests on it are https
// (fiber's c.Secure, the console's Secure cookie, HSTS).
type limitedTLSConn struct {
	*limitedConn
	tls *tls.Conn
}

func (c *limitedTLSConn) Handshake() error                     { return c.tls.Handshake() }
func (c *limitedTLSConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

func (c *limitedConn) Close() error {
	c.once.Do(func() { go c.lingerClose() })
	return nil
}

// lingerClose closes like a careful web server: it first ends its own
// side (the answer is already written), then reads and drops what the
// client still sends, for a bounded time and amount, and only then
// closes. Closing with unread bytes in the socket makes the kernel reset
// the connection, and the reset can destroy an answer (a 413 refused from
// Content-Length, a 401, a 408) before the client has read it. The slot
// stays taken until the end, so lingering connections count against the
// cap too.
func (c *limitedConn) lingerClose() {
	defer c.release()
	defer c.uncount()
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		if c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout)) == nil {
			// EOF (the client closed), the deadline or the limit: all end it.
			io.CopyN(io.Discard, c.Conn, lingerBytes)
		}
	}
	c.Conn.Close()
}
