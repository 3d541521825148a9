// Package durable writes files the way a database writes them: a crash at
// any moment leaves either the old state or the whole new file, never a
// torn or empty one. The token file, the store's marker and backups go
// through it.
package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// WriteNew writes a file that must not exist yet: the bytes go to a
// temporary file in the same folder (mode 0600), are synced, then linked
// under the name (fs.ErrExist if it is taken: of two processes, one wins),
// and the folder is synced so that the name survives a crash.
func WriteNew(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := writeTemp(dir, filepath.Base(path), data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // on failure; after the link it is already gone
	if err := os.Link(tmp, path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) && errors.Is(le.Err, fs.ErrExist) {
			return fs.ErrExist
		}
		return err
	}
	// The temporary name goes before the folder is synced, so one sync
	// makes both changes durable and a crash leaves no litter.
	if err := os.Remove(tmp); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Replace writes path whole, replacing what was there: a temporary file,
// synced, renamed over the name, then the folder synced.
func Replace(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := writeTemp(dir, filepath.Base(path), data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(dir)
}

func writeTemp(dir, base string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".tmp-*") // mode 0600
	if err != nil {
		return "", err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// SyncDir makes the entries of dir (a new name, a rename, a removal)
// durable. Windows cannot sync a folder; NTFS journals the entry itself.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
