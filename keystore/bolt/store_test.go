package bolt_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

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
