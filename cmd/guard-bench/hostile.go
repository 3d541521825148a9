package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// hostile is a soak of hostile clients: many unauthenticated connections, each
// announcing a large body and sending it slowly, against a running
// server, while authenticated reserves go on. It samples the server's
// resident memory from /proc/<pid>/status and reports its peak, and the
// reserves' latency during the attack.
//
//	guard-bench hostile --url http://127.0.0.1:8080 --token T --pid $(pidof n8n-guard) \
//	    --attackers 3000 --announce 1048576 --duration 30s
//
// --mode reconnect is a reconnect flood: idle sockets without a token
// that reconnect as soon as the server closes or refuses them, from their
// own loopback address (--from), while the reserves come from another.
// The run fails unless --min-answered of the reserves were answered 2xx.
//
//	guard-bench hostile --mode reconnect --attackers 4200 --from 127.0.0.2 ...
//
// It only attacks a loopback address, and every loop ends with --duration.
func hostile(args []string) error {
	h, err := parseHostile(args)
	if err != nil {
		return err
	}
	if _, err := readRSS(h.pid); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, h.ramp+h.o.duration)
	defer cancel()
	var rss rssPeak
	go rss.sample(ctx, h.pid)
	var st attackStats
	var wg sync.WaitGroup
	h.attack(ctx, &wg, &st)
	o := h.o
	o.scenario, o.concurrency, o.warmup, o.keys = "reserve-unique", h.reservers, h.ramp, 1
	o.label = fmt.Sprintf("during %d hostile connections", h.attackers)
	sum, err := drive(ctx, o)
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}
	return h.report(sum, &st, &rss)
}

// hostileRun is one hostile soak: its flags, checked.
type hostileRun struct {
	o                                                    options
	pid, attackers, announce, trickle, maxRSS, reservers int
	every, ramp                                          time.Duration
	mode, from                                           string
	minOK                                                float64
	addr                                                 string   // the server's host:port
	source                                               net.Addr // the attackers' address (nil: any)
}

// parseHostile reads hostile's flags and refuses what it must not do.
func parseHostile(args []string) (*hostileRun, error) {
	h := &hostileRun{}
	fs := flag.NewFlagSet("guard-bench hostile", flag.ContinueOnError)
	fs.StringVar(&h.o.url, "url", "http://127.0.0.1:8080", "base URL of the server (loopback only)")
	fs.StringVar(&h.o.token, "token", os.Getenv("N8N_GUARD_TOKEN"), "API token of the reserves (default $N8N_GUARD_TOKEN)")
	fs.IntVar(&h.pid, "pid", 0, "process id of the server, whose memory is sampled (Linux /proc)")
	fs.IntVar(&h.attackers, "attackers", 3000, "unauthenticated connections kept open at once")
	fs.IntVar(&h.announce, "announce", 1<<20, "Content-Length each attacker announces")
	fs.IntVar(&h.trickle, "trickle", 1024, "bytes an attacker sends at a time")
	fs.DurationVar(&h.every, "every", 250*time.Millisecond, "pause between an attacker's sends")
	fs.DurationVar(&h.o.duration, "duration", 30*time.Second, "how long the attack (and the measured reserves) last")
	fs.DurationVar(&h.ramp, "ramp", 3*time.Second, "time to open the attackers' connections before reserves are measured")
	fs.IntVar(&h.maxRSS, "max-rss-mib", 256, "fail when the server's peak RSS during the attack exceeds this")
	fs.IntVar(&h.reservers, "reservers", 4, "authenticated clients reserving during the attack")
	fs.StringVar(&h.o.namespace, "namespace", "bench", "namespace of the reserves")
	fs.StringVar(&h.mode, "mode", "slow-body", "slow-body: attackers trickle a large body; reconnect: idle sockets that reconnect when closed or refused")
	fs.StringVar(&h.from, "from", "", "loopback source address of the attackers (e.g. 127.0.0.2): another client than the reserves")
	fs.BoolVar(&h.o.fresh, "fresh-conns", false, "reserves open a new connection per request (default in --mode reconnect: a new connection is what a flood can refuse)")
	fs.Float64Var(&h.minOK, "min-answered", 0.99, "fail unless this share of the reserves during the attack was answered 2xx")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := h.check(); err != nil {
		return nil, err
	}
	if h.mode == "reconnect" && !isSet(fs, "fresh-conns") {
		h.o.fresh = true
	}
	if h.pid <= 0 || h.o.token == "" || h.attackers < 1 || h.o.duration <= 0 {
		return nil, errors.New("--pid, --token, a positive --attackers and --duration are required")
	}
	return h, nil
}

// check keeps the attack on loopback and its mode known, and sets addr
// and source.
func (h *hostileRun) check() error {
	u, err := url.Parse(h.o.url)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	if ip := net.ParseIP(u.Hostname()); !(u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())) {
		return fmt.Errorf("--url %s: hostile only attacks a loopback address", h.o.url)
	}
	h.addr = u.Host
	if h.from != "" {
		ip := net.ParseIP(h.from)
		if ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("--from %s: attackers only use loopback addresses", h.from)
		}
		h.source = &net.TCPAddr{IP: ip}
	}
	if h.mode != "slow-body" && h.mode != "reconnect" {
		return fmt.Errorf("unknown --mode %q", h.mode)
	}
	return nil
}

// rssPeak is the server's highest resident memory seen, and how often it
// was read.
type rssPeak struct{ peak, samples atomic.Int64 }

// sample reads pid's RSS every 100 ms until ctx ends.
func (r *rssPeak) sample(ctx context.Context, pid int) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for ctx.Err() == nil {
		if rss, err := readRSS(pid); err == nil {
			r.samples.Add(1)
			for old := r.peak.Load(); rss > old && !r.peak.CompareAndSwap(old, rss); old = r.peak.Load() {
			}
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// attack starts the attackers, spread over the ramp, each until ctx ends.
func (h *hostileRun) attack(ctx context.Context, wg *sync.WaitGroup, st *attackStats) {
	head := fmt.Sprintf("POST /v1/n8n/error HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", h.addr, h.announce)
	chunk := []byte(strings.Repeat("x", h.trickle))
	for i := range h.attackers {
		wg.Go(func() {
			// Spread the first connections over the ramp.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(i) * h.ramp / time.Duration(2*h.attackers)):
			}
			for ctx.Err() == nil {
				if h.mode == "reconnect" {
					st.idle(ctx, h.addr, h.source, h.every)
				} else {
					st.attack(ctx, h.addr, h.source, head, chunk, h.every)
				}
			}
		})
	}
}

// report prints the reserves, the attack and the server's memory, and
// fails when the memory went over --max-rss-mib or too few reserves were
// answered.
func (h *hostileRun) report(sum Summary, st *attackStats, rss *rssPeak) error {
	sum.print(os.Stdout)
	hwm, _ := readStatus(h.pid, "VmHWM:")
	now, _ := readRSS(h.pid)
	fmt.Printf("  attack       %s: %d connections opened, %d answered (%s), %d cut by the server\n",
		h.mode, st.opened.Load(), st.answered.Load(), st.statuses(), st.cut.Load())
	fmt.Printf("  server RSS   peak %.1f MiB during the attack (%d samples), %.1f MiB after, VmHWM %.1f MiB\n",
		mib(rss.peak.Load()), rss.samples.Load(), mib(now), mib(hwm))
	if rss.peak.Load() > int64(h.maxRSS)<<20 {
		return fmt.Errorf("peak RSS %.1f MiB is over %d MiB", mib(rss.peak.Load()), h.maxRSS)
	}
	tried := sum.Requests + sum.Failed4xx + sum.Failed5xx + sum.TransportErrors
	share := 0.0
	if tried > 0 {
		share = float64(sum.Requests) / float64(tried)
	}
	fmt.Printf("  reserves     %.2f%% of %d answered 2xx during the attack (p99 %.2f ms)\n", 100*share, tried, sum.P99ms)
	if sum.Requests == 0 || share < h.minOK {
		return fmt.Errorf("authenticated reserves were not answered during the attack: %d of %d (want %.2f%%), errors %v",
			sum.Requests, tried, 100*h.minOK, sum.Errors)
	}
	return nil
}

type attackStats struct {
	opened, answered, cut atomic.Int64
	mu                    sync.Mutex
	status                map[string]int
}

func (s *attackStats) statuses() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return counts(s.status)
}

// attack is one connection's life: the header, then the body in small
// pieces until the server cuts the connection or the attack ends.
func (s *attackStats) attack(ctx context.Context, addr string, source net.Addr, head string, chunk []byte, every time.Duration) {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: source}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		s.cut.Add(1)
		sleep(ctx, 50*time.Millisecond)
		return
	}
	defer c.Close()
	s.opened.Add(1)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	// The answer, if any, is read alongside the sending.
	answered := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			answered <- ""
			return
		}
		f := strings.Fields(line)
		if len(f) >= 2 {
			answered <- f[1]
			return
		}
		answered <- "?"
	}()
	if _, err := io.WriteString(c, head); err != nil {
		s.cut.Add(1)
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case status := <-answered:
			// Answered (or the server closed): go on sending, as a
			// hostile client would, until the server cuts the connection.
			answered = nil
			if status != "" {
				s.answered.Add(1)
				s.mu.Lock()
				if s.status == nil {
					s.status = map[string]int{}
				}
				s.status["http_"+status]++
				s.mu.Unlock()
			}
		case <-t.C:
			if _, err := c.Write(chunk); err != nil {
				s.cut.Add(1)
				sleep(ctx, every)
				return
			}
		}
	}
}

// idle is one reconnecting socket's life: connect, send nothing, wait for
// the server to close or refuse it (reading what it says), pause, and
// the caller connects again.
func (s *attackStats) idle(ctx context.Context, addr string, source net.Addr, every time.Duration) {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: source}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		s.cut.Add(1)
		sleep(ctx, every)
		return
	}
	defer c.Close()
	s.opened.Add(1)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	line, err := bufio.NewReader(c).ReadString('\n')
	if f := strings.Fields(line); err == nil && len(f) >= 2 {
		s.answered.Add(1)
		s.mu.Lock()
		if s.status == nil {
			s.status = map[string]int{}
		}
		s.status["http_"+f[1]]++
		s.mu.Unlock()
	} else if ctx.Err() == nil {
		s.cut.Add(1)
	}
	sleep(ctx, every)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func readRSS(pid int) (int64, error) { return readStatus(pid, "VmRSS:") }

// readStatus reads one "kB" field of /proc/<pid>/status, in bytes.
func readStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read the server's memory (Linux only): %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
