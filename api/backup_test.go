package api_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api"
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
		e := start(t)
		// What the server sees of a PostgreSQL store: no Backup method.
		srv, err := api.New(api.Config{Store: struct{ keystore.Store }{e.store}, Tokens: []string{testToken}, Registry: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		defer srv.Shutdown(context.Background())
		other := *e
		other.url = "http://" + ln.Addr().String()
		p := wantProblem(t, other.get(t, api.BackupPath), http.StatusNotImplemented, "unsupported")
		if p.Detail == "" {
			t.Fatal("no detail")
		}
	})
}
