package keystore_test

import (
	"path/filepath"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
)

func newBolt(t *testing.T, clock keystore.Clock, pol keystore.Policies) storetest.Opener {
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	return func() keystore.Store {
		s, err := keystore.OpenBolt(path, keystore.BoltOptions{Clock: clock, Policies: pol})
		if err != nil {
			t.Fatalf("open bolt: %v", err)
		}
		return s
	}
}

func TestBoltConformance(t *testing.T) { storetest.Run(t, newBolt) }
