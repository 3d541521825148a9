package main

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

func TestPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if p50, p95, p99 := pct(lat, .50), pct(lat, .95), pct(lat, .99); p50 != 50 || p95 != 95 || p99 != 99 {
		t.Fatalf("p50 %v p95 %v p99 %v", p50, p95, p99)
	}
	if pct(nil, .5) != 0 {
		t.Fatal("no samples")
	}
}

// Every scenario against the real API on a bbolt store: the outcomes are
// the ones the scenario must produce, and nothing fails.
func TestScenariosAgainstTheRealAPI(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "bench.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := api.New(api.Config{Store: st, Tokens: []string{"t0k"}, Registry: prometheus.NewRegistry(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	base := options{url: "http://" + ln.Addr().String(), token: "t0k", concurrency: 4,
		duration: 300 * time.Millisecond, warmup: 50 * time.Millisecond, keys: 2, namespace: "bench"}
	for _, tc := range []struct {
		scenario string
		want     []string // outcomes that must appear
		only     bool     // and no others
	}{
		{"healthz", []string{"healthz_ok"}, true},
		{"reserve-unique", []string{"accepted"}, true},
		{"duplicate-storm", []string{"in_progress"}, false},
		{"cycle", []string{"accepted", "completed"}, true},
	} {
		o := base
		o.scenario = tc.scenario
		sum, err := drive(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Errors) != 0 || sum.Requests == 0 || sum.RequestsPerS <= 0 || sum.P99ms < sum.P50ms {
			t.Fatalf("%s: %+v", tc.scenario, sum)
		}
		for _, w := range tc.want {
			if sum.Outcomes[w] == 0 {
				t.Fatalf("%s: no %s in %v", tc.scenario, w, sum.Outcomes)
			}
		}
		if tc.only && len(sum.Outcomes) != len(tc.want) {
			t.Fatalf("%s: outcomes %v", tc.scenario, sum.Outcomes)
		}
		if tc.scenario == "cycle" && (sum.Cycles == 0 || sum.Outcomes["completed"] != sum.Cycles) {
			t.Fatalf("cycle: %d cycles, outcomes %v", sum.Cycles, sum.Outcomes)
		}
	}
}

// A refused request is not throughput: a run whose every answer is 401
// reports no requests, counts the 4xx apart and fails (the tool exits 1).
func TestRefusalsAreNotThroughput(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "bench.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := api.New(api.Config{Store: st, Tokens: []string{"t0k"}, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	var out strings.Builder
	err = run([]string{"--url", "http://" + ln.Addr().String(), "--token", "wrong", "--concurrency", "2",
		"--duration", "200ms", "--warmup", "0s", "--scenario", "reserve-unique"}, &out)
	if err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("a run of refusals must fail, got %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "requests     0 answered 2xx") || !strings.Contains(out.String(), "http_401_unauthorized") {
		t.Fatalf("output:\n%s", &out)
	}
	var sum Summary
	out.Reset()
	err = run([]string{"--url", "http://" + ln.Addr().String(), "--token", "wrong", "--concurrency", "2",
		"--duration", "200ms", "--warmup", "0s", "--json"}, &out)
	if err == nil || json.Unmarshal([]byte(out.String()), &sum) != nil || sum.Requests != 0 || sum.Failed4xx == 0 || sum.RequestsPerS != 0 {
		t.Fatalf("json run: %v %+v\n%s", err, sum, &out)
	}
}
