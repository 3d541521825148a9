package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// BenchmarkReserveComplete reserves a unique key and completes it, from 8
// goroutines; BenchmarkReserveDuplicate answers copies of one reserved
// key (the optimistic read path, nothing written).
//
//	go test -run XXX -bench 'Reserve' -benchtime 2000x ./keystore/postgres/
func BenchmarkReserveComplete(b *testing.B) {
	s := openPgBench(b)
	ctx := context.Background()
	pgParallel(b, 8, func(i int) {
		key := fmt.Sprintf("evt_%09d", i)
		r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Owner: "n8n exec 4711"})
		if err != nil || r.Outcome != keystore.OutcomeAccepted {
			b.Fatalf("reserve: %v %s", err, r.Outcome)
		}
		if _, err := s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm-contacts", Key: key, Token: r.Token, ResultRef: "crm-contact-789"}); err != nil {
			b.Fatalf("complete: %v", err)
		}
	})
}

func BenchmarkReserveDuplicate(b *testing.B) {
	s := openPgBench(b)
	ctx := context.Background()
	req := keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_000000001", Owner: "n8n exec 4711"}
	if _, err := s.Reserve(ctx, req); err != nil {
		b.Fatal(err)
	}
	pgParallel(b, 8, func(int) {
		r, err := s.Reserve(ctx, req)
		if err != nil || r.Outcome != keystore.OutcomeInProgress {
			b.Fatalf("reserve: %v %s", err, r.Outcome)
		}
	})
}

func openPgBench(b *testing.B) *postgres.Store {
	b.Helper()
	base := pgtest.URL(b, "the PostgreSQL reserve benchmark")
	s, err := postgres.Open(context.Background(), pgtest.FreshSchema(b, base), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// pgParallel runs b.N calls of fn spread over exactly p goroutines.
func pgParallel(b *testing.B, p int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range p {
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
