//go:build !windows

package pgtest

import "syscall"

// detached puts a child in a process group of its own, so that a signal
// to the test's group does not reach it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
