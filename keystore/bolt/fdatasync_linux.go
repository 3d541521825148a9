package bolt

import (
	"os"
	"syscall"
)

// fdatasync makes f's data durable without its metadata (modification
// time), one disk flush less than fsync where only the data changed.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
