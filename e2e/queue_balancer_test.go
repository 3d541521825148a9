//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// guardBalancer is a round-robin load balancer in front of the guards, as
// a user puts nginx or HAProxy there with their defaults:
//   - each request goes to the next guard in turn;
//   - a guard that refuses the connection is skipped and the request goes
//     to the next one (nginx's proxy_next_upstream error; nothing was sent);
//   - a guard that dies with a request in flight leaves its client without
//     an answer: the client's connection is cut, as a TCP balancer does.
//     The guard may or may not have decided; the client cannot know, and
//     n8n's Retry On Fail sends the same request (same request_id) again.
//
// It also loses the answer to the first reserve of each key in lose: the
// guard decides and commits, the balancer holds the answer until n8n gives
// up waiting and then cuts the connection (the lost-answer scenario of
// lostanswer_test.go, here across two guards).
type guardBalancer struct {
	backends  []string
	transport *http.Transport
	srv       *http.Server
	addr      string
	next      atomic.Uint64

	mu       sync.Mutex
	lose     map[string]bool
	reserves map[string]int // reserves seen, per key
	dropped  map[string]int // answers lost on purpose, per key
	cut      int            // answers lost because a guard died mid-request
	skipped  int            // requests sent to the next guard after a refused connection
}

func startGuardBalancer(backends ...string) (*guardBalancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &guardBalancer{
		backends:  backends,
		transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second},
		addr:      ln.Addr().String(),
		lose:      map[string]bool{},
		reserves:  map[string]int{},
		dropped:   map[string]int{},
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(b.handle), ReadHeaderTimeout: 10 * time.Second}
	go b.srv.Serve(ln)
	return b, nil
}

func (b *guardBalancer) URL() string { return "http://" + b.addr }

func (b *guardBalancer) Close() {
	b.srv.Close()
	b.transport.CloseIdleConnections()
}

// Lose makes the balancer lose the answer to the first reserve of key.
func (b *guardBalancer) Lose(keys ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range keys {
		b.lose[k] = true
	}
}

// Counts tells, for the log and the checks, what the balancer did to key.
func (b *guardBalancer) Counts(key string) (reserves, dropped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserves[key], b.dropped[key]
}

// Failovers: answers lost to a guard dying mid-request, and requests
// moved to the next guard because one refused the connection.
func (b *guardBalancer) Failovers() (cut, skipped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cut, b.skipped
}

func (b *guardBalancer) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	drop := false
	if r.URL.Path == "/v1/reserve" {
		key := keyOf(body)
		b.mu.Lock()
		b.reserves[key]++
		drop = b.lose[key] && b.reserves[key] == 1
		b.mu.Unlock()
	}
	start := int(b.next.Add(1))
	var resp *http.Response
	var answer []byte
	for i := range b.backends {
		backend := b.backends[(start+i)%len(b.backends)]
		up, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, backend+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		up.Header = r.Header.Clone()
		resp, err = b.transport.RoundTrip(up)
		if err == nil {
			answer, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			break
		}
		if refused(err) {
			b.mu.Lock()
			b.skipped++
			b.mu.Unlock()
			continue
		}
		// The guard went away with the request sent: nobody knows what it
		// decided. Cut the client's connection without an answer.
		b.mu.Lock()
		b.cut++
		b.mu.Unlock()
		hangUp(w)
		return
	}
	if resp == nil {
		http.Error(w, "no guard accepted the connection", http.StatusBadGateway)
		return
	}
	if drop {
		// The guard has answered; the client waits until it gives up.
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		b.mu.Lock()
		b.dropped[keyOf(body)]++
		b.mu.Unlock()
		hangUp(w)
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// refused: the connection was never made, so nothing reached the guard.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// hangUp closes the client's connection without a byte of an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
		}
	}
}

// slowFront sits in front of the fake CRM: the CRM takes the write at
// once and its answer comes delay later, as a CRM under load answers
// after it committed. While delay is on, a worker killed mid-run is
// likely to die between the write and its record in the guard: the
// hardest moment for exactly once.
type slowFront struct {
	upstream string
	srv      *http.Server
	addr     string
	delay    atomic.Int64 // nanoseconds
	inFlight atomic.Int64 // writes taken, answer not yet given
}

func startSlowFront(upstream string) (*slowFront, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &slowFront{upstream: upstream, addr: ln.Addr().String()}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.handle), ReadHeaderTimeout: 10 * time.Second}
	go f.srv.Serve(ln)
	return f, nil
}

func (f *slowFront) URL() string { return "http://" + f.addr }

func (f *slowFront) Close() { f.srv.Close() }

// SetDelay sets how long answers wait after the write (0: none).
func (f *slowFront) SetDelay(d time.Duration) { f.delay.Store(int64(d)) }

// InFlight is the number of writes taken whose answer is still held.
func (f *slowFront) InFlight() int { return int(f.inFlight.Load()) }

func (f *slowFront) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	up, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, f.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		hangUp(w)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if d := time.Duration(f.delay.Load()); d > 0 {
		f.inFlight.Add(1)
		select {
		case <-r.Context().Done(): // the caller died or gave up: the write stays
		case <-time.After(d):
		}
		f.inFlight.Add(-1)
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}
