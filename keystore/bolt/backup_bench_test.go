package bolt_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// BenchmarkBackupWhileReserving copies a store of 100,000 keys while 16
// goroutines reserve new keys, and reports the copy's rate (MB/s) and
// the reserves answered per second during the copies and for as long
// again without them.
func BenchmarkBackupWhileReserving(b *testing.B) {
	ctx := context.Background()
	s, err := bolt.Open(filepath.Join(b.TempDir(), "n8n-guard.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100_000 / 16 {
				if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: fmt.Sprintf("seed-%d-%d", g, i)}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var stop atomic.Bool
	var reserved atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: fmt.Sprintf("load-%d-%d", g, i)}); err != nil {
					b.Error(err)
					return
				}
				reserved.Add(1)
			}
		}()
	}
	var size int64
	b.ResetTimer()
	start, before := time.Now(), reserved.Load()
	for range b.N {
		err := s.Backup(ctx, func(n int64, snap io.WriterTo) error {
			size = n
			_, err := snap.WriteTo(io.Discard)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	took, during := time.Since(start), reserved.Load()-before
	b.StopTimer()
	// The same time without copies, for comparison.
	before = reserved.Load()
	time.Sleep(took)
	without := reserved.Load() - before
	stop.Store(true)
	wg.Wait()
	b.SetBytes(size)
	b.ReportMetric(float64(during)/took.Seconds(), "reserves/s-copying")
	b.ReportMetric(float64(without)/took.Seconds(), "reserves/s-alone")
}
