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

// hostile is the soak of issue 15: many unauthenticated connections, each
// announcing a large body and sending it slowly, against a running
// server, while authenticated reserves go on. It samples the server's
// resident memory from /proc/<pid>/status and reports its peak, and the
// reserves' latency during the attack.
//
//	guard-bench hostile --url http://127.0.0.1:8080 --token T --pid $(pidof n8n-guard) \
//	    --attackers 3000 --announce 1048576 --duration 30s
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
				st.attack(ctx, addr, head, chunk, every)
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
	fmt.Printf("  attack       %d connections opened, %d answered (%s), %d cut by the server\n",
		st.opened.Load(), st.answered.Load(), st.statuses(), st.cut.Load())
	fmt.Printf("  server RSS   peak %.1f MiB during the attack (%d samples), %.1f MiB after, VmHWM %.1f MiB\n",
		mib(peak.Load()), samples.Load(), mib(now), mib(hwm))
	if peak.Load() > int64(maxRSS)<<20 {
		return fmt.Errorf("peak RSS %.1f MiB is over %d MiB", mib(peak.Load()), maxRSS)
	}
	if sum.Requests == 0 || len(sum.Errors) > 0 {
		return fmt.Errorf("authenticated reserves were not all answered during the attack: %d answered, errors %v", sum.Requests, sum.Errors)
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
func (s *attackStats) attack(ctx context.Context, addr, head string, chunk []byte, every time.Duration) {
	d := net.Dialer{Timeout: 2 * time.Second}
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
