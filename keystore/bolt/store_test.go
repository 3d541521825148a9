package bolt_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
	bbolt "go.etcd.io/bbolt"
)

// boltWith opens bbolt stores with opts (plus each test's clock and
// policies).
func boltWith(opts bolt.Options) storetest.New {
	return func(t *testing.T, clock keystore.Clock, pol keystore.Policies) storetest.Opener {
		path := filepath.Join(t.TempDir(), "n8n-guard.db")
		return func() keystore.Store {
			o := opts
			o.Clock, o.Policies = clock, pol
			s, err := bolt.Open(path, o)
			if err != nil {
				t.Fatalf("open bolt: %v", err)
			}
			return s
		}
	}
}

func TestBoltConformance(t *testing.T) { storetest.Run(t, boltWith(bolt.Options{})) }

// flipByte damages the stored record of ns/key the way a disk does: one
// byte of its value flipped, beneath the store.
func flipByte(t *testing.T, s keystore.Store, ns, key string) {
	t.Helper()
	rk := append(append([]byte(ns), 0), key...)
	err := s.(*bolt.Store).DB().Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("keys"))
		v := bytes.Clone(b.Get(rk))
		if len(v) == 0 {
			return fmt.Errorf("no record %s/%s", ns, key)
		}
		v[len(v)-1] ^= 0x5a
		return b.Put(rk, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBoltDamagedRecords(t *testing.T) {
	storetest.RunDamage(t, boltWith(bolt.Options{}), flipByte)
}

// A reclaim namespace's lapsed leases stay in the lease index (the
// listings of reserved keys read it): sweep batches of one entry go on
// past them, from the cursor, to the lease behind that expires.
func TestBoltSweepGoesOnPastKeptLeases(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New()
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		"crm": {OnLeaseExpiry: keystore.ExpireReclaim, Lease: 30 * time.Second}, "mail": {Lease: 40 * time.Second}}}
	s := boltWith(bolt.Options{SweepBatch: 1})(t, clock.Now, pol)()
	defer s.Close()
	for _, ref := range []keystore.KeyRef{{Namespace: "crm", Key: "evt_1"}, {Namespace: "crm", Key: "evt_2"}, {Namespace: "mail", Key: "evt_3"}} {
		if r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: ref.Namespace, Key: ref.Key}); err != nil || r.Outcome != keystore.OutcomeAccepted {
			t.Fatalf("reserve %v: %+v %v", ref, r, err)
		}
	}
	clock.Advance(41 * time.Second)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a sweep that reads the same entries for ever fails here
	defer cancel()
	if st, err := s.Sweep(sctx); err != nil || st.LeasesExpired != 1 {
		t.Fatalf("sweep: %+v %v, want mail's lease expired", st, err)
	}
	if r, err := s.Lookup(ctx, "mail", "evt_3"); err != nil || r.Record.State != keystore.StateUnknown {
		t.Fatalf("mail/evt_3 after the sweep: %+v %v", r.Record, err)
	}
}
