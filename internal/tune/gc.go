package tune

import (
	"os"
	"runtime/debug"
)

// The garbage collector's settings for serving, unless the GOGC or
// GOMEMLIMIT environment variable chose (the runtime reads them itself).
//
// The service's live heap is small (about 10 MiB under load: the store
// is a memory-mapped file, not heap), so at Go's default GOGC=100 the
// collector ran every few MiB of request garbage and took about a sixth
// of the server's CPU at 64 connections. GOGC=400 lets the heap grow to
// five times the live data between collections: measured over HTTP on
// 2 cores (docs/performance.md, "Over HTTP"), server CPU per reserve
// went from 87-91 µs to 64-68 µs and reserves from 12.0k-12.4k/s to
// 14.4k-14.5k/s, resident memory from 50 to 68 MiB. The memory limit
// keeps a large live heap (thousands of open connections) from being
// multiplied by five: near it the collector runs as often as it must,
// and below a live heap of 96 MiB it never runs more often than at the
// default. The hostile soak peaks at 188 MiB resident.
const (
	serveGCPercent = 400
	serveMemoryCap = 192 << 20
)

// GC applies them where the real environment (which the runtime reads)
// did not choose, until the returned func sets back what was (serve
// returns: tests run it in their own process).
func GC() (undo func()) { return gc(os.Getenv) }

// gc applies the settings above where getenv says the operator did not
// choose.
func gc(getenv func(string) string) (undo func()) {
	pct, limit := -2, int64(-1) // -2: not changed
	if getenv("GOGC") == "" {
		pct = debug.SetGCPercent(serveGCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		limit = debug.SetMemoryLimit(serveMemoryCap)
	}
	return func() {
		if pct != -2 {
			debug.SetGCPercent(pct)
		}
		if limit >= 0 {
			debug.SetMemoryLimit(limit)
		}
	}
}
