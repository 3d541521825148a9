package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
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
