//go:build !windows

package pgtest

import "syscall"

// detached starts a process in a group of its own.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
