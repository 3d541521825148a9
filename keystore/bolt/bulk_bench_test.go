package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// BenchmarkResolveMany100k decides 100,000 unknown keys in one bulk
// decision (a CRM incident) while reserves of other keys keep arriving,
// then checks that every key's history names the action and the person.
// Run with -benchtime 1x; KEYSTORE_BULK_KEYS changes the count.
func BenchmarkResolveMany100k(b *testing.B) {
	n := 100_000
	if v := os.Getenv("KEYSTORE_BULK_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	for run := range b.N {
		b.StopTimer()
		s, err := Open(filepath.Join(b.TempDir(), "n8n-guard.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		loadUnknown(b, s, n, time.Now())
		// Live traffic during the decision: one reserve after another,
		// the worst latency reported.
		stop := make(chan struct{})
		done := make(chan struct{})
		var worst, reserves atomic.Int64
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "orders", Key: fmt.Sprintf("live-%d-%d", run, i), Owner: "n8n exec 1"}); err != nil {
					b.Error(err)
					return
				}
				reserves.Add(1)
				if d := time.Since(t0).Nanoseconds(); d > worst.Load() {
					worst.Store(d)
				}
			}
		}()
		req := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm-contacts", States: []keystore.State{keystore.StateUnknown}},
			Resolution: keystore.StateFailed, By: "ann@example.com", Note: "CRM incident 4711: retry after the fix", ID: "b-bench001"}
		b.StartTimer()
		t0 := time.Now()
		res, err := keystore.ResolveMany(ctx, s, req)
		took := time.Since(t0)
		b.StopTimer()
		close(stop)
		<-done
		if err != nil || res.Matched != n || res.Decided != n {
			b.Fatalf("bulk: %+v %v", res, err)
		}
		// Every key: failed, its last history entry the bulk's, by the person.
		checked := 0
		err = s.view(func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketKeys).ForEach(func(k, v []byte) error {
				ns, key := splitRecordKey(k)
				if ns != "crm-contacts" {
					return nil
				}
				r, err := decodeRecord(ns, key, v)
				if err != nil {
					return err
				}
				last := r.History[len(r.History)-1]
				if r.State != keystore.StateFailed || last.By != req.By || !strings.HasPrefix(last.Detail, "bulk b-bench001, failed: ") {
					return fmt.Errorf("%s: %s %+v", key, r.State, last)
				}
				checked++
				return nil
			})
		})
		if err != nil || checked != n {
			b.Fatalf("checked %d of %d: %v", checked, n, err)
		}
		b.ReportMetric(took.Seconds(), "s/bulk")
		b.ReportMetric(float64(n)/took.Seconds(), "decided/s")
		b.ReportMetric(float64(worst.Load())/1e6, "worst-reserve-ms")
		b.ReportMetric(float64(reserves.Load()), "reserves-during-bulk")
		s.Close()
	}
}

// loadUnknown writes n unknown keys (reserved, then outcome_unknown)
// directly, in large transactions.
func loadUnknown(b *testing.B, s *Store, n int, clock time.Time) {
	b.Helper()
	np := s.policies.Namespace("crm-contacts")
	for start := 0; start < n; start += 20000 {
		err := s.db.Load().Update(func(tx *bbolt.Tx) error {
			for i := start; i < min(start+20000, n); i++ {
				key := fmt.Sprintf("lead_%016x", uint64(i)*0x9E3779B97F4A7C15)
				st, err := keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Owner: "n8n LeadCrm exec " + strconv.Itoa(i)}, nil, np, clock)
				if err != nil {
					return err
				}
				u, err := keystore.DecideFail(st.Record, nil, keystore.FailRequest{Namespace: "crm-contacts", Key: key, Token: st.Result.Token, Reason: keystore.ReasonOutcomeUnknown}, np, keystore.DestinationPolicy{}, clock)
				if err != nil {
					return err
				}
				if err := putRecord(tx, nil, u.Record); err != nil {
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
