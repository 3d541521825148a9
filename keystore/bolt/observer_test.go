package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// observed records what a store tells its Observer.
type observed struct {
	mu      sync.Mutex
	commits int
	writes  int
	took    time.Duration
	errors  []string
	sweeps  int
	damaged int
	checks  int
}

func (o *observed) RecordDamaged() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.damaged++
}

func (o *observed) BackgroundCheckFailed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checks++
}

func (o *observed) Committed(writes int, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commits++
	o.writes += writes
	o.took += took
}

func (o *observed) StorageError(op string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errors = append(o.errors, op+": "+err.Error())
}

func (o *observed) SweepPaused(time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sweeps++
}

func TestObserver(t *testing.T) {
	ctx := context.Background()
	t.Run("every write in some commit, a sweep's batches", func(t *testing.T) {
		var obs observed
		clock := fakeclock.New()
		s, err := bolt.Open(filepath.Join(t.TempDir(), "n8n-guard.db"), bolt.Options{Observer: &obs, Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: fmt.Sprint("evt-", i), Lease: time.Minute}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		clock.Advance(2 * time.Minute)
		st, err := s.Sweep(ctx)
		if err != nil || st.LeasesExpired != 100 {
			t.Fatalf("sweep: %+v %v", st, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		// 100 reserves and at least one batch of each of the sweep's three
		// passes; each sweep batch is one write.
		if obs.commits == 0 || obs.writes < 103 || obs.took <= 0 {
			t.Fatalf("commits %d holding %d writes in %v; want every write of 100 reserves and a sweep", obs.commits, obs.writes, obs.took)
		}
		if obs.sweeps < 3 || len(obs.errors) != 0 {
			t.Fatalf("sweep batches %d, errors %v", obs.sweeps, obs.errors)
		}
	})

	t.Run("a file that refuses writes", func(t *testing.T) {
		var obs observed
		s, err := bolt.Open(filepath.Join(t.TempDir(), "n8n-guard.db"), bolt.Options{Observer: &obs})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.DB().Close() // behind the store's back: its next transaction cannot begin
		// (complete: a reserve would already fail on its read snapshot)
		_, err = s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm", Key: "evt-1", Token: "1.00000000000000000000000000000000"})
		if errs.CodeOf(err) != errs.StoreUnavailable {
			t.Fatalf("complete on a closed file: %v", err)
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if len(obs.errors) != 1 {
			t.Fatalf("storage errors observed: %v", obs.errors)
		}
	})
}
