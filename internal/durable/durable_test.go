package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteNewAndReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api-token")
	if err := WriteNew(path, []byte("first\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteNew(path, []byte("second\n")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second WriteNew: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first\n" {
		t.Fatalf("WriteNew over an existing file changed it: %q", b)
	}
	if err := Replace(path, []byte("third\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "third\n" {
		t.Fatalf("after Replace: %q", b)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("mode %o, want 0600", perm)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}
