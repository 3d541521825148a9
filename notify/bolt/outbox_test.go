package bolt_test

import (
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/bolt"
	"github.com/n8n-guard/n8n-guard/notify/outboxtest"
)

// The conformance suite on a real bbolt file.
func TestOutbox(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T) notify.Outbox {
		db, err := bbolt.Open(filepath.Join(t.TempDir(), "guard.db"), 0o600, &bbolt.Options{Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		o, err := bolt.New(func() *bbolt.DB { return db })
		if err != nil {
			t.Fatal(err)
		}
		return o
	})
}
