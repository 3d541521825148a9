package api_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

func TestBackupRoute(t *testing.T) {
	t.Run("the store file, whole, with its size", func(t *testing.T) {
		e := start(t)
		for _, k := range []string{"evt-1", "evt-2", "evt-3"} {
			e.accepted(t, k)
		}
		r := e.get(t, api.BackupPath)
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("backup: %d %s", r.Status, r.Header.Get("Content-Type"))
		}
		if n, _ := strconv.Atoi(r.Header.Get("Content-Length")); n != len(r.Body) || n == 0 {
			t.Fatalf("Content-Length %q, body %d bytes", r.Header.Get("Content-Length"), len(r.Body))
		}
		path := filepath.Join(t.TempDir(), "copy.db")
		if err := os.WriteFile(path, r.Body, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := bolt.Check(path, 0)
		if err != nil || !rep.OK() || rep.Keys != 3 {
			t.Fatalf("check of the copy: %+v %v", rep, err)
		}
		s, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Lookup(context.Background(), "crm-contacts", "evt-2")
		if err != nil || res.Outcome != keystore.OutcomeFound || res.Record.State != keystore.StateReserved {
			t.Fatalf("a key in the copy: %+v %v", res, err)
		}
	})

	t.Run("without a token", func(t *testing.T) {
		e := start(t)
		wantProblem(t, e.callWith(t, http.MethodGet, api.BackupPath, nil, nil), http.StatusUnauthorized, "unauthorized")
	})

	t.Run("a store that cannot copy itself says so", func(t *testing.T) {
		e := start(t, withoutBackup()) // as cmd/n8n-guard wires a PostgreSQL store
		p := wantProblem(t, e.get(t, api.BackupPath), http.StatusNotImplemented, "unsupported")
		if p.Detail == "" {
			t.Fatal("no detail")
		}
	})
}

// A client that hangs up mid-copy ends the snapshot: no read transaction
// is left open to hold bbolt's pages (and, at Close, the store) forever.
func TestBackupClientHangsUp(t *testing.T) {
	e := start(t)
	// 32 MiB in a bucket of its own (the copy takes the whole file, as
	// with the notify outbox's buckets): more than the socket buffers hold.
	err := e.store.DB().Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("test-filler"))
		if err != nil {
			return err
		}
		for i := range 32 {
			if err := b.Put([]byte{byte(i)}, make([]byte, 1<<20)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer %s\r\n\r\n", api.BackupPath, testToken)
	head := make([]byte, 512)
	if _, err := io.ReadFull(conn, head); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(head), "HTTP/1.1 200") {
		t.Fatalf("backup answered %q", head[:40])
	}
	if n := e.store.DB().Stats().OpenTxN; n != 1 {
		t.Fatalf("%d read transactions open while the copy is being sent, want 1", n)
	}
	conn.Close()
	testwait.Within(t, 10*time.Second, "the snapshot closed after the client hung up", func() bool { return e.store.DB().Stats().OpenTxN == 0 })
}
