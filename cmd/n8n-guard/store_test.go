package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// TestMain lets this test binary stand in for n8n-guard when `store
// check` starts its child process (os.Executable is the test binary).
func TestMain(m *testing.M) {
	if os.Getenv(checkChildEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// storeWithKeys writes n reserved keys into a store file of its own and
// returns its path and the first page of the keys bucket.
func storeWithKeys(t *testing.T, n int) (path string, keysRoot int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), StoreFile)
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "crm", Key: fmt.Sprintf("evt-%04d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o400, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bbolt.Tx) error {
		keysRoot = int(tx.Bucket([]byte("keys")).RootPage())
		return nil
	})
	if keysRoot == 0 {
		t.Fatal("the keys bucket is inline; write more keys")
	}
	return path, keysRoot
}

func damage(t *testing.T, path string, do func(f *os.File)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	do(f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStoreCheck(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, path string, keysRoot int)
		wantOut string // on stdout
		wantErr string // "" for success
	}{
		{name: "healthy file", wantOut: ": ok (", damage: func(*testing.T, string, int) {}},
		{name: "truncated to a third", wantErr: "the file is truncated", damage: func(t *testing.T, path string, _ int) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/3); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "both meta pages overwritten", wantErr: "neither meta page is valid", damage: func(t *testing.T, path string, _ int) {
			damage(t, path, func(f *os.File) {
				f.WriteAt(make([]byte, 8192), 0)
			})
		}},
		{name: "one meta page overwritten", wantErr: "meta page 0 is not valid", damage: func(t *testing.T, path string, _ int) {
			damage(t, path, func(f *os.File) { f.WriteAt([]byte("garbage!"), 20) })
		}},
		// bbolt's check meets the zeroed page either in the goroutine that
		// recovers its panic (reported as a problem) or where it crashes
		// the child process: both are a clear "damaged".
		{name: "the keys bucket's root page zeroed", wantErr: "bbolt's page walk crashed|Page expected to be", damage: func(t *testing.T, path string, root int) {
			damage(t, path, func(f *os.File) { f.WriteAt(make([]byte, 4096), int64(root)*4096) })
		}},
		{name: "two records' values flipped", wantErr: "2 records fail their checksum", damage: func(t *testing.T, path string, _ int) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damage(t, path, func(f *os.File) {
				for _, key := range []string{"evt-0007", "evt-0123"} {
					// In a leaf page a record's value follows its key; a
					// sealed value starts with 0x01.
					i := strings.Index(string(b), "crm\x00"+key+"\x01")
					if i < 0 {
						t.Fatalf("record %s not found in the file", key)
					}
					f.WriteAt([]byte{b[i+len(key)+14] ^ 0x40}, int64(i+len(key)+14))
				}
			})
		}, wantOut: "damaged record: crm/evt-0007\n"},
		{name: "not a store at all", wantErr: "neither meta page is valid", damage: func(t *testing.T, path string, _ int) {
			os.WriteFile(path, []byte(strings.Repeat("not bbolt ", 2000)), 0o600)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, root := storeWithKeys(t, 300)
			tc.damage(t, path, root)
			out, err := runCLI(t, nil, "store", "check", "--file", path)
			if tc.wantErr == "" {
				if err != nil || !strings.Contains(out, tc.wantOut) || !strings.Contains(out, "300 keys") {
					t.Fatalf("check of a healthy file: %q %v", out, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("check passed a damaged file: %q", out)
			}
			said := false
			for _, want := range strings.Split(tc.wantErr, "|") {
				said = said || strings.Contains(err.Error(), want)
			}
			if !said || !strings.Contains(err.Error(), "restore the last good backup") {
				t.Fatalf("check said %q, want %q and the way out", err, tc.wantErr)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Fatalf("check printed %q, want %q", out, tc.wantOut)
			}
		})
	}

	t.Run("refused while a server holds the file", func(t *testing.T) {
		data := t.TempDir()
		m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{"t"}}, nil)
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		_, err := runCLI(t, nil, "store", "check", "--data", data)
		if err == nil || !strings.Contains(err.Error(), "in use by a running n8n-guard") || !strings.Contains(err.Error(), "backup --out") {
			t.Fatalf("check of a file in use: %v", err)
		}
	})
}

// A backup put back in place: serve refuses, naming --accept-restore;
// with it (Config.AcceptRestore) the server starts on the restored file.
func TestServeRefusesARestoreUnlessAccepted(t *testing.T) {
	const token = "t"
	data := t.TempDir()
	path := filepath.Join(data, StoreFile)
	serveOnce := func(accept bool, keys ...string) error {
		t.Helper()
		m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: data, Tokens: []string{token}, AcceptRestore: accept}, nil)
		if err := m.Run(context.Background()); err != nil {
			return err
		}
		defer m.Close()
		for _, key := range keys {
			if status, d := call(t, "http://"+m.Addr(), token, http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm", "key": key}); status != 200 {
				t.Fatalf("reserve %s: %d %v", key, status, d)
			}
		}
		return nil
	}
	if err := serveOnce(false, "evt-1"); err != nil {
		t.Fatal(err)
	}
	backup, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := serveOnce(false, "evt-2", "evt-3"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	err = serveOnce(false)
	if err == nil || !strings.Contains(err.Error(), "--accept-restore") {
		t.Fatalf("serve on a restored older file: %v", err)
	}
	if err := serveOnce(true); err != nil {
		t.Fatalf("serve --accept-restore: %v", err)
	}
	if err := serveOnce(false); err != nil {
		t.Fatalf("the start after an accepted restore: %v", err)
	}
}
