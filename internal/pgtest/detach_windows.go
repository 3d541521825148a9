package pgtest

import "syscall"

// detached: Windows has no process groups to leave; the PostgreSQL test
// servers (started through sh) do not run there.
func detached() *syscall.SysProcAttr { return nil }
