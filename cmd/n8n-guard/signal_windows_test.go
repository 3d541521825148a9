package main

import "testing"

// sigterm: Windows cannot send a process SIGTERM (os.Process.Signal
// supports only Kill there); the rest of the test needs it.
func sigterm(t *testing.T) {
	t.Helper()
	t.Skip("SIGTERM is a Unix signal")
}
