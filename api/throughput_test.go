package api_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/tune"
)

// TestHTTPThroughput measures POST /v1/reserve (every request a new key,
// durable before it is answered) against GET /healthz (the no-op route) in
// one run: a real listener on loopback, a real bbolt file, 64 clients each
// on its own keep-alive connection. It runs only when asked:
//
//	N8N_GUARD_BENCH=10s go test -run TestHTTPThroughput -v ./api/
//
// The contract's target: reserve at least 40% of the no-op route's rate.
// N8N_GUARD_BENCH_ROUNDS sets how many turns each route takes (default 3).
func TestHTTPThroughput(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("N8N_GUARD_BENCH"))
	if err != nil || d <= 0 {
		t.Skip("set N8N_GUARD_BENCH to a duration (e.g. 10s) to measure")
	}
	const clients = 64
	// The server runs with the Ps n8n-guard serve gives a bbolt store.
	defer tune.Procs()()
	e := start(t)
	e.unrecorded = true
	tr := &http.Transport{MaxConnsPerHost: clients, MaxIdleConnsPerHost: clients, MaxIdleConns: clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	var seq atomic.Int64
	reserve := func() *http.Request {
		body := []byte(`{"namespace":"bench","key":"evt_` + strconv.FormatInt(seq.Add(1), 10) + `","owner":"bench","lease_seconds":300}`)
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/reserve", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	healthz := func() *http.Request {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/healthz", nil)
		return req
	}

	load(t, hc, clients, time.Second, healthz) // warm up connections
	load(t, hc, clients, time.Second, reserve)
	// The machine's speed drifts within seconds, so the routes take turns:
	// no-op, reserve, no-op, … and each reserve run is compared with the
	// no-op runs on either side of it. The median of those ratios is the
	// figure.
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("N8N_GUARD_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	t.Logf("GOMAXPROCS=%s, %d keep-alive connections, %s per run", runtimeProcs(), clients, d)
	h := load(t, hc, clients, d, healthz)
	var ratios []float64
	for i := range rounds {
		r := load(t, hc, clients, d, reserve)
		h2 := load(t, hc, clients, d, healthz)
		noop := (h.rate + h2.rate) / 2
		ratios = append(ratios, r.rate/noop)
		t.Logf("round %d: GET /healthz %6.0f req/s (p50 %s, p99 %s) · POST /v1/reserve %6.0f req/s (p50 %s, p99 %s, all accepted, durable) · %.0f%%",
			i+1, noop, h2.p50, h2.p99, r.rate, r.p50, r.p99, 100*r.rate/noop)
		h = h2
	}
	slices.Sort(ratios)
	ratio := ratios[len(ratios)/2]
	t.Logf("reserve / no-op = %.0f%% (median of %d rounds; target >= 40%%)", 100*ratio, rounds)
	if lookup := e.get(t, "/v1/lookup?namespace=bench&key=evt_1"); lookup.Status != http.StatusOK {
		t.Fatalf("lookup after the run: %s", lookup)
	}
	if ratio < 0.40 && os.Getenv("N8N_GUARD_BENCH_STRICT") != "" {
		t.Fatalf("reserve is %.0f%% of the no-op route, below the 40%% target", 100*ratio)
	}
}

type loadResult struct {
	rate     float64
	p50, p99 time.Duration
}

// load runs clients loops of newReq for d and measures every request.
func load(t *testing.T, hc *http.Client, clients int, d time.Duration, newReq func() *http.Request) loadResult {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		all   []time.Duration
		fails atomic.Int64
	)
	stop := time.Now().Add(d)
	begin := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<14)
			for time.Now().Before(stop) {
				req := newReq()
				t0 := time.Now()
				res, err := hc.Do(req)
				if err != nil {
					fails.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					fails.Add(1)
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if n := fails.Load(); n > 0 {
		t.Fatalf("%d requests failed", n)
	}
	slices.Sort(all)
	if len(all) == 0 {
		t.Fatal("no request completed")
	}
	pct := func(p float64) time.Duration { return all[int(p*float64(len(all)-1))].Round(10 * time.Microsecond) }
	return loadResult{rate: float64(len(all)) / elapsed.Seconds(), p50: pct(0.50), p99: pct(0.99)}
}

func runtimeProcs() string { return fmt.Sprint(runtime.GOMAXPROCS(0)) }
