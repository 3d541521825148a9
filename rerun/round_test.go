package rerun_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// reads is a store that records every key its reads (List and
// KeysAtStage) hand out.
type reads struct {
	keystore.Store
	mu   sync.Mutex
	read []*keystore.Record
}

func (s *reads) List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error) {
	p, err := s.Store.List(ctx, q)
	s.note(p.Items)
	return p, err
}

func (s *reads) KeysAtStage(ctx context.Context, q keystore.StageQuery) ([]*keystore.Record, error) {
	rs, err := s.Store.KeysAtStage(ctx, q)
	s.note(rs)
	return rs, err
}

func (s *reads) note(rs []*keystore.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.read = append(s.read, rs...)
}

// A round reads the granted keys from the stage index, and no failed key
// that no person allowed to re-run: with many executions waiting at their
// gate and one granted, the round starts the granted one having read it
// alone.
func TestARoundReadsNoFailedKeyThatIsNotGranted(t *testing.T) {
	e := setup(t)
	for i := range 30 {
		e.atGate(fmt.Sprintf("wait_%02d", i), fmt.Sprint(100+i), "")
	}
	e.atGate("allowed", "42", "crm")
	e.grant("allowed")
	store := &reads{Store: e.store}
	f := newN8n(func(string) (string, error) { return "57", nil })
	r, err := rerun.New(store, f, rerun.Options{Reads: -1, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	rerun.Round(e.ctx, r)
	if got := f.retries(); len(got) != 1 || got[0] != "42" {
		t.Fatalf("retries %v, want execution 42 once", got)
	}
	for _, rec := range store.read {
		if _, granted := keystore.RerunGranted(rec); !granted && rec.Key != "allowed" {
			t.Errorf("the round read %s (state %s, stage %q): not granted", rec.Key, rec.State, rec.Stage)
		}
	}
	if len(store.read) == 0 {
		t.Fatal("the round read nothing")
	}
}

// BenchmarkRoundAtFailedKeysNoGrant is one round of the re-run worker
// over a store of 20,000 failed keys waiting at their gate, none granted:
// the round finds nothing to do.
func BenchmarkRoundAtFailedKeysNoGrant(b *testing.B) {
	e := setup(&testing.T{})
	defer e.store.Close()
	const keys = 20000
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < keys; i += 64 {
				owner := fmt.Sprintf("n8n wf1 exec %d", i)
				key := fmt.Sprintf("k%05d", i)
				r, err := e.store.Reserve(e.ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Owner: owner, Destination: ""})
				if err == nil {
					_, err = e.store.Fail(e.ctx, keystore.FailRequest{Namespace: "crm", Key: key, Token: r.Token, Reason: keystore.ReasonDestinationFailed})
				}
				if err == nil {
					_, err = e.store.Reserve(e.ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Owner: owner, Destination: "", Rerun: true})
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	f := newN8n(func(string) (string, error) { return "57", nil })
	r, err := rerun.New(e.store, f, rerun.Options{Reads: -1, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		rerun.Round(e.ctx, r)
	}
	b.StopTimer()
	if len(f.retries()) != 0 {
		b.Fatalf("retries %v, want none", f.retries())
	}
}
