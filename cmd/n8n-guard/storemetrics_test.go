package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// scrape returns the samples of /metrics by series (name and labels).
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	samples := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			samples[line[:i]] = v
		}
	}
	return samples
}

// The bbolt store's series are on /metrics from the start and move with
// commits and sweeps.
func TestStoreMetrics(t *testing.T) {
	const token = "t"
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{token}, SweepInterval: 20 * time.Millisecond}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	before := scrape(t, base)
	for _, series := range []string{
		"n8n_guard_store_commit_duration_seconds_count", "n8n_guard_store_commit_writes_sum",
		"n8n_guard_store_file_bytes", "n8n_guard_sweep_pause_seconds_count",
	} {
		if _, ok := before[series]; !ok {
			t.Errorf("%s is not on /metrics", series)
		}
	}
	if before["n8n_guard_store_file_bytes"] <= 0 {
		t.Errorf("store file size %v", before["n8n_guard_store_file_bytes"])
	}
	const n = 50
	for i := range n {
		if status, d := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": fmt.Sprint("evt-", i)}); status != 200 {
			t.Fatalf("reserve: %d %v", status, d)
		}
	}
	// The writer commits within its interval; the sweeper runs every 20 ms.
	var after map[string]float64
	if !testwait.Poll(15*time.Second, func() bool { // generous: CI runs -race on 2 busy cores
		after = scrape(t, base)
		return after["n8n_guard_store_commit_writes_sum"]-before["n8n_guard_store_commit_writes_sum"] >= n &&
			after["n8n_guard_sweep_pause_seconds_count"] > before["n8n_guard_sweep_pause_seconds_count"]
	}) {
		t.Fatalf("the store's series did not move: before %v\nafter %v", pick(before), pick(after))
	}
	if after["n8n_guard_store_commit_duration_seconds_count"] <= before["n8n_guard_store_commit_duration_seconds_count"] ||
		after["n8n_guard_store_commit_duration_seconds_sum"] <= 0 {
		t.Errorf("commit duration did not move: %v -> %v", pick(before), pick(after))
	}
}

func pick(samples map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range samples {
		if strings.HasPrefix(k, "n8n_guard_store_") || strings.HasPrefix(k, "n8n_guard_sweep_") {
			out[k] = v
		}
	}
	return out
}

// A record damaged on disk, through the real server: the key answers 500
// record_damaged naming it, every time, and the metric counts it once;
// other keys are served.
func TestDamagedRecordOverHTTP(t *testing.T) {
	const token = "t"
	data := t.TempDir()
	path := filepath.Join(data, StoreFile)
	m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{token}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr()
	status, d := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "evt-1"})
	if status != 200 {
		t.Fatalf("reserve: %d %v", status, d)
	}
	if status, d := call(t, base, token, http.MethodPost, "/v1/complete", map[string]any{"namespace": "crm", "key": "evt-1", "token": d["token"], "result_ref": "crm-1"}); status != 200 {
		t.Fatalf("complete: %d %v", status, d)
	}
	m.Close()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("keys"))
		v := bytes.Clone(b.Get([]byte("crm\x00evt-1")))
		v[len(v)/2] ^= 0x10
		return b.Put([]byte("crm\x00evt-1"), v)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	m = NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{token}}, nil)
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base = "http://" + m.Addr()
	for range 2 {
		status, d := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "evt-1"})
		if status != http.StatusInternalServerError || d["code"] != "record_damaged" || !strings.Contains(fmt.Sprint(d["detail"]), "crm/evt-1") {
			t.Fatalf("reserve of the damaged key: %d %v", status, d)
		}
	}
	if status, d := call(t, base, token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": "evt-2"}); status != 200 {
		t.Fatalf("another key: %d %v", status, d)
	}
	if got := scrape(t, base)["n8n_guard_records_damaged_total"]; got != 1 {
		t.Fatalf("n8n_guard_records_damaged_total = %v, want 1", got)
	}
}
