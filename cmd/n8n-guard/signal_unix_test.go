//go:build !windows

package main

import (
	"os"
	"syscall"
	"testing"
)

// sigterm sends this process SIGTERM, as a service manager stops serve.
func sigterm(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
