package tune

import (
	"os"
	"runtime"
)

// Procs gives a server on a bbolt store twice the default GOMAXPROCS,
// unless the GOMAXPROCS environment variable chose (the runtime reads it
// from the real environment; so does this). It returns what sets the
// previous value back.
//
// bbolt's writer and syncer spend much of their time in pwrite and
// fdatasync while holding a P, which the Go runtime hands to other
// goroutines only after a delay; meanwhile a core sits idle with requests
// waiting. Spare Ps keep the cores busy. Measured on 2 cores
// (docs/performance.md): reserve over HTTP went from about a third of the
// no-op route's rate with 2 Ps to about 40% with 4.
func Procs() (undo func()) { return procs(os.Getenv) }

func procs(getenv func(string) string) (undo func()) {
	if getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(2 * runtime.GOMAXPROCS(0))
	return func() { runtime.GOMAXPROCS(prev) }
}
