package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	bbolt "go.etcd.io/bbolt"
)

// A sweep that fails (here: a lease index entry too short to hold its
// time, which no write of the store leaves) fails alone: the writes
// decided next to it are answered as usual.
func TestFailingSweepFailsNoOneElse(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "n8n-guard.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.db.Load().Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketLeases).Put([]byte{0}, nil) })
	if err != nil {
		t.Fatal(err)
	}
	stop, swept := make(chan struct{}), make(chan struct{})
	failed := 0
	go func() {
		defer close(swept)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Sweep(ctx); err != nil {
				failed++
			}
		}
	}()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "n", Key: fmt.Sprint("k", g, "_", i), Owner: "t"}); err != nil {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-swept
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d reserves failed next to a failing sweep", n)
	}
	if failed == 0 {
		t.Fatal("the sweep never failed: the test tested nothing")
	}
}
