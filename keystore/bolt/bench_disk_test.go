package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// benchRecords is the record count of the disk benchmarks (1M by default;
// KEYSTORE_BENCH_RECORDS lowers it for a quick look).
func benchRecords(b *testing.B) int {
	if v := os.Getenv("KEYSTORE_BENCH_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkDiskBytesPerRecord writes finished records the way production
// does (reserve then complete, 64 concurrent callers, group commit) and
// reports the file size per record. Run with -benchtime 1x.
func BenchmarkDiskBytesPerRecord(b *testing.B) {
	n := benchRecords(b)
	path := filepath.Join(b.TempDir(), "n8n-guard.db")
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				key := fmt.Sprintf("evt_%016x", uint64(i)*0x9E3779B97F4A7C15) // spread like real event IDs
				r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Owner: "n8n exec 4711"})
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm-contacts", Key: key, Token: r.Token, ResultRef: "crm-contact-" + strconv.FormatInt(i, 10)}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Size())/float64(n), "file-bytes/record")
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkSweep1M deletes a million expired records and reports the
// longest write transaction the sweep held. Run with -benchtime 1x.
func BenchmarkSweep1M(b *testing.B) {
	n := benchRecords(b)
	clock := fakeclock.New()
	s, err := Open(filepath.Join(b.TempDir(), "n8n-guard.db"), Options{Clock: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	np := s.policies.Namespace("crm-contacts")
	loadFinished(b, s, n, clock.Now())
	clock.Advance(np.Retention + time.Hour)
	// Reserves keep coming during the sweep; their worst latency shows
	// whether the sweep stalls them.
	stop := make(chan struct{})
	var worst atomic.Int64
	var reserves atomic.Int64
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			if _, err := s.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "live", Key: fmt.Sprintf("k%d", i)}); err != nil {
				b.Error(err)
				return
			}
			reserves.Add(1)
			if d := int64(time.Since(t0)); d > worst.Load() {
				worst.Store(d)
			}
		}
	}()
	b.ResetTimer()
	st, err := s.Sweep(context.Background())
	b.StopTimer()
	close(stop)
	if err != nil {
		b.Fatal(err)
	}
	if st.Expired != n {
		b.Fatalf("swept %d of %d", st.Expired, n)
	}
	b.ReportMetric(float64(st.LongestTx.Microseconds())/1000, "longest-tx-ms")
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "deleted/s")
	b.ReportMetric(float64(worst.Load())/1e6, "worst-reserve-ms")
	b.ReportMetric(float64(reserves.Load()), "reserves-during-sweep")
}

// loadFinished writes n finished records of random keys directly, in large
// transactions: for benchmarks about what comes after.
func loadFinished(b *testing.B, s *Store, n int, clock time.Time) {
	b.Helper()
	np := s.policies.Namespace("crm-contacts")
	for start := 0; start < n; start += 20000 {
		err := s.db.Load().Update(func(tx *bbolt.Tx) error {
			for i := start; i < min(start+20000, n); i++ {
				key := fmt.Sprintf("evt_%016x", uint64(i)*0x9E3779B97F4A7C15)
				st, err := keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Owner: "n8n exec 4711"}, nil, np, clock)
				if err != nil {
					return err
				}
				done, err := keystore.DecideComplete(st.Record, nil, keystore.CompleteRequest{Namespace: "crm-contacts", Key: key, ResultRef: "crm-1", Via: keystore.ViaPrimary, Token: st.Result.Token}, np, clock)
				if err != nil {
					return err
				}
				if err := putRecord(tx, nil, done.Record); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStart1M and BenchmarkStart10M measure what a start costs at a
// million and ten million records: Open (meta pages, bbolt's open, the
// schema and the marker) until it returns and the store answers, and the
// whole-file check that runs after it in the background (the page walk,
// the key count and bbolt's tx.Check) until it ends. Run with -benchtime
// 1x; the 10M file is generated first (several minutes, about 2 GB in
// the test's temporary folder, removed after).
func BenchmarkStart1M(b *testing.B) { benchStart(b, 1_000_000) }

func BenchmarkStart10M(b *testing.B) { benchStart(b, 10_000_000) }

func benchStart(b *testing.B, n int) {
	if v := os.Getenv("KEYSTORE_BENCH_RECORDS"); v != "" {
		n = benchRecords(b)
	}
	path := filepath.Join(b.TempDir(), "n8n-guard.db")
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	loadAscending(b, s, n, time.Now())
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(path)
	b.ResetTimer()
	var start, check time.Duration
	for range b.N {
		t0 := time.Now()
		s, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		start += time.Since(t0)
		if _, err := s.Lookup(context.Background(), "crm-contacts", "evt_0000000000000000"); err != nil {
			b.Fatal(err)
		}
		if err := s.Checked(); err != nil {
			b.Fatal(err)
		}
		check += time.Since(t0)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(st.Size())/(1<<20), "file-MiB") // after ResetTimer, which drops metrics
	b.ReportMetric(start.Seconds()*1000/float64(b.N), "start-ms")
	b.ReportMetric(check.Seconds()*1000/float64(b.N), "background-check-done-ms")
}

// loadAscending writes n finished records with ascending keys, 100,000 to
// a transaction: bbolt appends them instead of splitting pages all over
// the file, so ten million take minutes, not hours. A start reads no
// record, so the key order does not change what it costs.
func loadAscending(b *testing.B, s *Store, n int, clock time.Time) {
	b.Helper()
	np := s.policies.Namespace("crm-contacts")
	const batch = 100_000
	for start := 0; start < n; start += batch {
		err := s.db.Load().Update(func(tx *bbolt.Tx) error {
			tx.Bucket(bucketKeys).FillPercent = 0.9
			for i := start; i < min(start+batch, n); i++ {
				key := fmt.Sprintf("evt_%016x", i)
				st, err := keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Owner: "n8n exec 4711"}, nil, np, clock)
				if err != nil {
					return err
				}
				done, err := keystore.DecideComplete(st.Record, nil, keystore.CompleteRequest{Namespace: "crm-contacts", Key: key, ResultRef: "crm-1", Via: keystore.ViaPrimary, Token: st.Result.Token}, np, clock)
				if err != nil {
					return err
				}
				if err := putRecord(tx, nil, done.Record); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
