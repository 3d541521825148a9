package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// serve runs the real API on a fresh bbolt file and answers its address.
func serve(t *testing.T) string {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := api.New(api.Config{Store: st, Tokens: []string{"t0k"}, Registry: prometheus.NewRegistry(), Version: "v-test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String()
}

func TestAgainstTheRealAPI(t *testing.T) {
	ctx := context.Background()
	base := serve(t)
	c := client.New(base+"/", client.Options{Token: "t0k", Timeout: 5 * time.Second})

	if h, err := c.Health(ctx); err != nil || h.Status != "ok" || h.Version != "v-test" {
		t.Fatalf("health = %+v, %v", h, err)
	}
	for _, key := range []string{"a", "b", "c"} {
		var a api.Answer
		if err := c.Do(ctx, http.MethodPost, "/v1/reserve", map[string]string{"namespace": "crm", "key": key}, &a); err != nil || a.Outcome != keystore.OutcomeAccepted {
			t.Fatalf("reserve %s = %+v, %v", key, a, err)
		}
	}
	t.Run("keys page by page", func(t *testing.T) {
		var got []string
		q := client.KeyQuery{Namespace: "crm", State: keystore.StateReserved, Limit: 2}
		for {
			page, err := c.Keys(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Items {
				got = append(got, r.Key)
			}
			if q.Cursor = page.NextCursor; q.Cursor == "" {
				break
			}
		}
		if strings.Join(got, ",") != "a,b,c" {
			t.Fatalf("keys %v, want a,b,c over two pages", got)
		}
	})
	t.Run("lookup of a key never seen", func(t *testing.T) {
		raw, err := c.Lookup(ctx, "crm", "never")
		if err != nil || !bytes.Contains(raw, []byte(`"found":false`)) {
			t.Fatalf("lookup = %s, %v", raw, err)
		}
	})
	t.Run("resolve a live reservation is a conflict problem", func(t *testing.T) {
		_, err := c.Resolve(ctx, client.Resolution{Namespace: "crm", Key: "a", Resolution: keystore.StateCompleted, By: "me", Note: "checked"})
		var e *client.Error
		if !errors.As(err, &e) || e.Code() != string(errs.Conflict) || e.Status != http.StatusConflict {
			t.Fatalf("err = %v, want the server's conflict problem", err)
		}
		a, err := c.Resolve(ctx, client.Resolution{Namespace: "crm", Key: "a", Resolution: keystore.StateCompleted, By: "me", Note: "checked", Force: true})
		if err != nil || a.State != keystore.StateCompleted {
			t.Fatalf("forced resolve = %+v, %v", a, err)
		}
	})
	t.Run("every broken field is said", func(t *testing.T) {
		err := c.Do(ctx, http.MethodPost, "/v1/reserve", []byte(`{"namespace":"","key":""}`), nil)
		var e *client.Error
		if !errors.As(err, &e) || e.Problem == nil || len(e.Problem.Fields) == 0 {
			t.Fatalf("err = %v, want a problem with fields", err)
		}
		for _, f := range e.Problem.Fields {
			if !strings.Contains(err.Error(), "\n  "+f.Field+": ") {
				t.Errorf("%q does not list field %s", err, f.Field)
			}
		}
	})
	t.Run("a wrong token", func(t *testing.T) {
		_, err := client.New(base, client.Options{Token: "wrong"}).Keys(ctx, client.KeyQuery{})
		if err == nil || !strings.Contains(err.Error(), "unauthorized (HTTP 401)") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("nobody listening", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		_, err := client.New(dead.URL, client.Options{}).Health(ctx)
		if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), dead.URL) {
			t.Fatalf("err = %v, want ErrUnreachable naming the address", err)
		}
	})
}

// What sits in front of the guard misbehaves: a proxy's page, a backup
// cut short, an answer that never begins.
func TestMisbehavingServer(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/keys":
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte("<html>502 Bad Gateway</html>"))
		case r.URL.Path == api.BackupPath && r.Header.Get("Authorization") == "Bearer short":
			w.Header().Set("Content-Length", "100")
			w.Write(make([]byte, 10))
		default:
			<-release
		}
	}))
	defer srv.Close()
	defer close(release)

	_, err := client.New(srv.URL, client.Options{}).Keys(ctx, client.KeyQuery{})
	var e *client.Error
	if !errors.As(err, &e) || e.Problem != nil || !strings.Contains(err.Error(), "GET /v1/keys?: HTTP 502: <html>502 Bad Gateway</html>") {
		t.Fatalf("proxy page: %v", err)
	}
	var buf bytes.Buffer
	if _, err := client.New(srv.URL, client.Options{Token: "short"}).Backup(ctx, &buf); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short backup: %v", err)
	}
	_, err = client.New(srv.URL, client.Options{Token: "slow", Timeout: 100 * time.Millisecond}).Backup(ctx, &buf)
	if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Fatalf("backup that never begins: %v", err)
	}
}

// A backup copy may take longer than the timeout once it began.
func TestBackupOutlastsTheTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		w.Write([]byte("a"))
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond)
		w.Write([]byte("b"))
	}))
	defer srv.Close()
	var buf bytes.Buffer
	n, err := client.New(srv.URL, client.Options{Timeout: 100 * time.Millisecond}).Backup(context.Background(), &buf)
	if err != nil || n != 2 || buf.String() != "ab" {
		t.Fatalf("backup = %d %q, %v", n, buf.String(), err)
	}
}
