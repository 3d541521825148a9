// Command guard-bench is a load tool for a running n8n-guard server. It
// drives the HTTP API over keep-alive connections with a fixed number of
// concurrent clients for a fixed time, and prints throughput, latency
// percentiles, outcome counts and error counts. Only 2xx answers count as
// throughput and latency; 4xx, 5xx and transport errors are counted and
// printed apart, and a run that has any exits non-zero: it measured a
// server that refused, not one that worked.
//
//	guard-bench --url http://127.0.0.1:8080 --token T --scenario reserve-unique --concurrency 64 --duration 10s
//
// Scenarios:
//
//	reserve-unique   every request reserves a new key (all accepted)
//	duplicate-storm  many copies of few keys (--keys): one accepted per key, the rest in_progress
//	cycle            reserve then complete with the token (two requests per cycle)
//	healthz          GET /healthz: the HTTP ceiling, no store involved
//
// `guard-bench serve` starts the real API (package api) over a store of
// choice, for measuring a backend the service binary cannot open yet
// (serve.go); `guard-bench postgres` starts a throwaway PostgreSQL with
// production durability and prints its URL (postgres.go); `guard-bench
// hostile` floods a server with slow unauthenticated connections and
// reports its peak memory and the reserves' latency meanwhile (hostile.go).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/client"
)

func main() {
	if len(os.Args) > 1 {
		sub := map[string]func([]string) error{"serve": serve, "postgres": postgres, "report": report, "hostile": hostile}[os.Args[1]]
		if sub != nil {
			if err := sub(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "guard-bench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "guard-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	url         string
	token       string
	scenario    string
	concurrency int
	duration    time.Duration
	warmup      time.Duration
	keys        int
	namespace   string
	label       string
	jsonOut     bool
	fresh       bool // a new connection per request (no keep-alive), as a client without an agent does
}

func run(args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("guard-bench", flag.ContinueOnError)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "base URL of the n8n-guard server")
	fs.StringVar(&o.token, "token", os.Getenv("N8N_GUARD_TOKEN"), "API token (default $N8N_GUARD_TOKEN)")
	fs.StringVar(&o.scenario, "scenario", "reserve-unique", "reserve-unique | duplicate-storm | cycle | healthz")
	fs.IntVar(&o.concurrency, "concurrency", 64, "concurrent clients, each with its own keep-alive connection")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "load before measuring (not counted)")
	fs.IntVar(&o.keys, "keys", 16, "distinct keys of duplicate-storm")
	fs.StringVar(&o.namespace, "namespace", "bench", "namespace of the keys")
	fs.StringVar(&o.label, "label", "", "a name for this run in the output (e.g. the backend)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the summary as one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch o.scenario {
	case "reserve-unique", "duplicate-storm", "cycle", "healthz":
	default:
		return fmt.Errorf("unknown --scenario %q", o.scenario)
	}
	if o.concurrency < 1 || o.duration <= 0 || o.keys < 1 {
		return errors.New("--concurrency, --duration and --keys must be positive")
	}
	if o.token == "" && o.scenario != "healthz" {
		return errors.New("--token (or N8N_GUARD_TOKEN) is required")
	}
	// A bounded run that also stops on Ctrl-C.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sum, err := drive(ctx, o)
	if err != nil {
		return err
	}
	if o.jsonOut {
		if err := json.NewEncoder(stdout).Encode(sum); err != nil {
			return err
		}
		return sum.failed()
	}
	sum.print(stdout)
	return sum.failed()
}

// failed is the error of a run that had any answer other than 2xx.
func (s Summary) failed() error {
	if n := s.Failed4xx + s.Failed5xx + s.TransportErrors; n > 0 {
		return fmt.Errorf("%d requests failed (4xx %d, 5xx %d, transport %d: %s); throughput counts only the %d answered 2xx",
			n, s.Failed4xx, s.Failed5xx, s.TransportErrors, counts(s.Errors), s.Requests)
	}
	return nil
}

// Summary is what one run measured.
type Summary struct {
	Label        string         `json:"label,omitempty"`
	Scenario     string         `json:"scenario"`
	URL          string         `json:"url"`
	Concurrency  int            `json:"concurrency"`
	Seconds      float64        `json:"seconds"`
	Requests     int            `json:"requests"` // answered 2xx: the only ones in throughput and latency
	RequestsPerS float64        `json:"requests_per_second"`
	Cycles       int            `json:"cycles,omitempty"`
	CyclesPerS   float64        `json:"cycles_per_second,omitempty"`
	P50ms        float64        `json:"p50_ms"`
	P95ms        float64        `json:"p95_ms"`
	P99ms        float64        `json:"p99_ms"`
	MaxMs        float64        `json:"max_ms"`
	Outcomes     map[string]int `json:"outcomes"`
	// Failed4xx, Failed5xx and TransportErrors are the requests that got
	// no 2xx answer; Errors breaks them down by status and problem code.
	Failed4xx       int            `json:"failed_4xx"`
	Failed5xx       int            `json:"failed_5xx"`
	TransportErrors int            `json:"transport_errors"`
	Errors          map[string]int `json:"errors"`
}

func (s Summary) print(w io.Writer) {
	name := s.Scenario
	if s.Label != "" {
		name = s.Label + " / " + s.Scenario
	}
	fmt.Fprintf(w, "%s  concurrency %d, %.1fs against %s\n", name, s.Concurrency, s.Seconds, s.URL)
	fmt.Fprintf(w, "  requests     %d answered 2xx  (%.0f/s)\n", s.Requests, s.RequestsPerS)
	if s.Cycles > 0 {
		fmt.Fprintf(w, "  cycles       %d  (%.0f/s, reserve + complete)\n", s.Cycles, s.CyclesPerS)
	}
	fmt.Fprintf(w, "  latency ms   p50 %.2f  p95 %.2f  p99 %.2f  max %.2f\n", s.P50ms, s.P95ms, s.P99ms, s.MaxMs)
	fmt.Fprintf(w, "  outcomes     %s\n", counts(s.Outcomes))
	fmt.Fprintf(w, "  failed       4xx %d  5xx %d  transport %d  (not in the figures above)\n", s.Failed4xx, s.Failed5xx, s.TransportErrors)
	fmt.Fprintf(w, "  errors       %s\n", counts(s.Errors))
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString("  ")
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

// worker is one client: its own connection, its own tallies.
type worker struct {
	id        int
	o         options
	client    *client.Client
	runID     string
	seq       int
	lat       []time.Duration // of 2xx answers only
	outcomes  map[string]int
	errors    map[string]int
	failed    [3]int // 4xx, 5xx, transport
	cycles    int
	measuring bool
}

// answer is what a scenario reads of a success.
type answer struct {
	Outcome string `json:"outcome"`
	Token   string `json:"token"`
}

func drive(ctx context.Context, o options) (Summary, error) {
	base := strings.TrimRight(o.url, "/")
	o.url = base
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        o.concurrency,
		MaxIdleConnsPerHost: o.concurrency,
		MaxConnsPerHost:     o.concurrency,
		DisableCompression:  true,
		IdleConnTimeout:     90 * time.Second,
		DisableKeepAlives:   o.fresh,
	}
	defer transport.CloseIdleConnections()
	c := client.New(base, client.Options{Token: o.token, Timeout: 30 * time.Second, Transport: transport})
	// Fail fast when the server is not there.
	if _, err := c.Health(ctx); err != nil {
		return Summary{}, fmt.Errorf("server not reachable: %w", err)
	}
	runID := randomID()
	workers := make([]*worker, o.concurrency)
	for i := range workers {
		workers[i] = &worker{id: i, o: o, client: c, runID: runID,
			outcomes: map[string]int{}, errors: map[string]int{}, lat: make([]time.Duration, 0, 1<<14)}
	}
	measureFrom := time.Now().Add(o.warmup)
	end := measureFrom.Add(o.duration)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				now := time.Now()
				if !now.Before(end) {
					return
				}
				w.measuring = !now.Before(measureFrom)
				w.iteration()
			}
		}()
	}
	wg.Wait()
	elapsed := o.duration
	if ctx.Err() != nil {
		elapsed = max(time.Since(measureFrom), time.Millisecond)
	}
	return summarize(o, workers, elapsed), nil
}

func (w *worker) iteration() {
	switch w.o.scenario {
	case "healthz":
		w.call(http.MethodGet, "/healthz", nil)
	case "reserve-unique":
		w.call(http.MethodPost, "/v1/reserve", w.reserveBody(w.uniqueKey()))
	case "duplicate-storm":
		key := fmt.Sprintf("%s-storm-%d", w.runID, mrand.IntN(w.o.keys))
		w.call(http.MethodPost, "/v1/reserve", w.reserveBody(key))
	case "cycle":
		key := w.uniqueKey()
		a, ok := w.call(http.MethodPost, "/v1/reserve", w.reserveBody(key))
		if !ok || a.Outcome != "accepted" {
			return
		}
		body, _ := json.Marshal(map[string]string{"namespace": w.o.namespace, "key": key, "token": a.Token, "result_ref": "bench-" + key})
		if a, ok := w.call(http.MethodPost, "/v1/complete", body); ok && a.Outcome == "completed" && w.measuring {
			w.cycles++
		}
	}
}

func (w *worker) uniqueKey() string {
	w.seq++
	return fmt.Sprintf("%s-%d-%d", w.runID, w.id, w.seq)
}

func (w *worker) reserveBody(key string) []byte {
	b, _ := json.Marshal(map[string]string{"namespace": w.o.namespace, "key": key, "owner": "guard-bench"})
	return b
}

// call makes one request and tallies it when measuring. ok says the
// answer was a 2xx with a readable body.
func (w *worker) call(method, path string, body []byte) (answer, bool) {
	var a answer
	var in any // a nil []byte would be sent as an empty body
	if body != nil {
		in = body
	}
	start := time.Now()
	err := w.client.Do(context.Background(), method, path, in, &a)
	took := time.Since(start)
	var e *client.Error
	switch {
	case errors.As(err, &e):
		// Refusals are not throughput: no latency sample.
		code := e.Code()
		if code == "" {
			code = "no_code"
		}
		w.fail(fmt.Sprintf("http_%d_%s", e.Status, code))
		return a, false
	case err != nil:
		w.fail("transport")
		return answer{}, false
	}
	if w.measuring {
		w.lat = append(w.lat, took)
		switch {
		case a.Outcome != "":
			w.outcomes[a.Outcome]++
		case path == "/healthz":
			w.outcomes["healthz_ok"]++
		default:
			w.outcomes["no_outcome"]++
		}
	}
	return a, true
}

func (w *worker) fail(kind string) {
	if !w.measuring {
		return
	}
	w.errors[kind]++
	switch {
	case strings.HasPrefix(kind, "http_4"):
		w.failed[0]++
	case strings.HasPrefix(kind, "http_"):
		w.failed[1]++
	default:
		w.failed[2]++
	}
}

func summarize(o options, workers []*worker, elapsed time.Duration) Summary {
	s := Summary{Label: o.label, Scenario: o.scenario, URL: o.url, Concurrency: o.concurrency,
		Seconds: elapsed.Seconds(), Outcomes: map[string]int{}, Errors: map[string]int{}}
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.lat...)
		for k, v := range w.outcomes {
			s.Outcomes[k] += v
		}
		for k, v := range w.errors {
			s.Errors[k] += v
		}
		s.Cycles += w.cycles
		s.Failed4xx += w.failed[0]
		s.Failed5xx += w.failed[1]
		s.TransportErrors += w.failed[2]
	}
	slices.Sort(all)
	s.Requests = len(all)
	s.RequestsPerS = float64(s.Requests) / elapsed.Seconds()
	s.CyclesPerS = float64(s.Cycles) / elapsed.Seconds()
	s.P50ms, s.P95ms, s.P99ms = pct(all, 0.50), pct(all, 0.95), pct(all, 0.99)
	if len(all) > 0 {
		s.MaxMs = ms(all[len(all)-1])
	}
	return s
}

// pct is the nearest-rank percentile of sorted latencies, in ms.
func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return ms(sorted[max(0, min(i, len(sorted)-1))])
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

func randomID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
