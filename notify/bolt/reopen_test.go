package bolt

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The keystore's bbolt store closes and reopens the file it shares with the
// outbox after a storage error; the outbox must use the new handle, not
// keep failing on the closed one until a restart.
func TestOutboxFollowsAReopenedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	first, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[bolt.DB]
	cur.Store(first)
	o, err := New(cur.Load)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := o.SetSlackUser(ctx, "ops@example.com", "U0OPS"); err != nil {
		t.Fatal(err)
	}

	// The store's reopen: the old handle is closed, a new one takes its place.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	cur.Store(second)

	id, ok, err := o.SlackUser(ctx, "ops@example.com")
	if err != nil || !ok || id != "U0OPS" {
		t.Fatalf("after the reopen: SlackUser = %q, %v, %v; want U0OPS from the reopened file", id, ok, err)
	}
	if err := o.SetSlackUser(ctx, "lead@example.com", "U0LEAD"); err != nil {
		t.Fatalf("a write after the reopen: %v", err)
	}
}
