package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

func openBench(b *testing.B) *bolt.Store {
	b.Helper()
	s, err := bolt.Open(filepath.Join(b.TempDir(), "n8n-guard.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// parallel runs b.N calls of fn spread over exactly p goroutines.
func parallel(b *testing.B, p int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	b.StartTimer()
	for g := 0; g < p; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// Durable reserves of unique keys: every accepted answer is fsync'd.
func BenchmarkReserveUnique(b *testing.B) {
	for _, p := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("p%d", p), func(b *testing.B) {
			s := openBench(b)
			ctx := context.Background()
			parallel(b, p, func(i int) {
				r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: fmt.Sprintf("evt_%09d", i), Owner: "n8n exec 4711"})
				if err != nil || r.Outcome != keystore.OutcomeAccepted {
					b.Fatalf("%v %s", err, r.Outcome)
				}
			})
		})
	}
}

func BenchmarkComplete(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	tokens := make([]string, b.N)
	parallel(b, 64, func(i int) { // setup: reserve the keys to complete
		r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: fmt.Sprintf("evt_%09d", i)})
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = r.Token
	})
	parallel(b, 64, func(i int) {
		_, err := s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm-contacts", Key: fmt.Sprintf("evt_%09d", i), Token: tokens[i], ResultRef: "crm-contact-789"})
		if err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkLookup(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	const keys = 10000
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < keys; i += 64 {
				s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: fmt.Sprintf("evt_%09d", i)})
			}
		}(g)
	}
	wg.Wait()
	parallel(b, 8, func(i int) {
		r, err := s.Lookup(ctx, "crm-contacts", fmt.Sprintf("evt_%09d", i%keys))
		if err != nil || r.Record == nil {
			b.Fatal(err)
		}
	})
}
