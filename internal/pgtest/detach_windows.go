package pgtest

import "syscall"

// detached: Windows has no process groups of this kind; the throwaway
// servers need a Unix shell anyway (pg_ctl, sh), so this only has to
// compile.
func detached() *syscall.SysProcAttr { return nil }
