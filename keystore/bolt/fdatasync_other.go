//go:build !linux

package bolt

import "os"

// fdatasync is a full sync where the system call exists only on Linux:
// on macOS, os.File.Sync is F_FULLFSYNC (the drive's cache too); on
// Windows, FlushFileBuffers.
func fdatasync(f *os.File) error { return f.Sync() }
