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
	var (
		o         options
		pid       int
		attackers int
		announce  int
		trickle   int
		every     time.Duration
		ramp      time.Duration
		maxRSS    int
		reservers int
		mode      string
		from      string
		minOK     float64
	)
	fs := flag.NewFlagSet("guard-bench hostile", flag.ContinueOnError)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "base URL of the server (loopback only)")
	fs.StringVar(&o.token, "token", os.Getenv("N8N_GUARD_TOKEN"), "API token of the reserves (default $N8N_GUARD_TOKEN)")
	fs.IntVar(&pid, "pid", 0, "process id of the server, whose memory is sampled (Linux /proc)")
	fs.IntVar(&attackers, "attackers", 3000, "unauthenticated connections kept open at once")
	fs.IntVar(&announce, "announce", 1<<20, "Content-Length each attacker announces")
	fs.IntVar(&trickle, "trickle", 1024, "bytes an attacker sends at a time")
	fs.DurationVar(&every, "every", 250*time.Millisecond, "pause between an attacker's sends")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long the attack (and the measured reserves) last")
	fs.DurationVar(&ramp, "ramp", 3*time.Second, "time to open the attackers' connections before reserves are measured")
	fs.IntVar(&maxRSS, "max-rss-mib", 256, "fail when the server's peak RSS during the attack exceeds this")
	fs.IntVar(&reservers, "reservers", 4, "authenticated clients reserving during the attack")
	fs.StringVar(&o.namespace, "namespace", "bench", "namespace of the reserves")
	fs.StringVar(&mode, "mode", "slow-body", "slow-body: attackers trickle a large body; reconnect: idle sockets that reconnect when closed or refused")
	fs.StringVar(&from, "from", "", "loopback source address of the attackers (e.g. 127.0.0.2): another client than the reserves")
	fs.BoolVar(&o.fresh, "fresh-conns", false, "reserves open a new connection per request (default in --mode reconnect: a new connection is what a flood can refuse)")
	fs.Float64Var(&minOK, "min-answered", 0.99, "fail unless this share of the reserves during the attack was answered 2xx")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(o.url)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	if ip := net.ParseIP(u.Hostname()); !(u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())) {
		return fmt.Errorf("--url %s: hostile only attacks a loopback address", o.url)
	}
	var source net.Addr
	if from != "" {
		ip := net.ParseIP(from)
		if ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("--from %s: attackers only use loopback addresses", from)
		}
		source = &net.TCPAddr{IP: ip}
	}
	if mode != "slow-body" && mode != "reconnect" {
		return fmt.Errorf("unknown --mode %q", mode)
	}
	if mode == "reconnect" && !isSet(fs, "fresh-conns") {
		o.fresh = true
	}
	if pid <= 0 || o.token == "" || attackers < 1 || o.duration <= 0 {
		return errors.New("--pid, --token, a positive --attackers and --duration are required")
	}
	if _, err := readRSS(pid); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, ramp+o.duration)
	defer cancel()

	var peak, samples atomic.Int64
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil {
			if rss, err := readRSS(pid); err == nil {
				samples.Add(1)
				for old := peak.Load(); rss > old && !peak.CompareAndSwap(old, rss); old = peak.Load() {
				}
			}
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}()

	var st attackStats
	var wg sync.WaitGroup
	addr := u.Host
	head := fmt.Sprintf("POST /v1/n8n/error HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, announce)
	chunk := []byte(strings.Repeat("x", trickle))
	for i := range attackers {
		wg.Go(func() {
			// Spread the first connections over the ramp.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(i) * ramp / time.Duration(2*attackers)):
			}
			for ctx.Err() == nil {
				if mode == "reconnect" {
					st.idle(ctx, addr, source, every)
				} else {
					st.attack(ctx, addr, source, head, chunk, every)
				}
			}
		})
	}
	o.scenario, o.concurrency, o.warmup, o.keys = "reserve-unique", reservers, ramp, 1
	o.label = fmt.Sprintf("during %d hostile connections", attackers)
	sum, err := drive(ctx, o)
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}
	sum.print(os.Stdout)
	hwm, _ := readStatus(pid, "VmHWM:")
	now, _ := readRSS(pid)
	fmt.Printf("  attack       %s: %d connections opened, %d answered (%s), %d cut by the server\n",
		mode, st.opened.Load(), st.answered.Load(), st.statuses(), st.cut.Load())
	fmt.Printf("  server RSS   peak %.1f MiB during the attack (%d samples), %.1f MiB after, VmHWM %.1f MiB\n",
		mib(peak.Load()), samples.Load(), mib(now), mib(hwm))
	if peak.Load() > int64(maxRSS)<<20 {
		return fmt.Errorf("peak RSS %.1f MiB is over %d MiB", mib(peak.Load()), maxRSS)
	}
	tried := sum.Requests + sum.Failed4xx + sum.Failed5xx + sum.TransportErrors
	share := 0.0
	if tried > 0 {
		share = float64(sum.Requests) / float64(tried)
	}
	fmt.Printf("  reserves     %.2f%% of %d answered 2xx during the attack (p99 %.2f ms)\n", 100*share, tried, sum.P99ms)
	if sum.Requests == 0 || share < minOK {
		return fmt.Errorf("authenticated reserves were not answered during the attack: %d of %d (want %.2f%%), errors %v",
			sum.Requests, tried, 100*minOK, sum.Errors)
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
