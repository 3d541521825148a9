package tune

import (
	"math"
	"runtime/debug"
	"testing"
)

func restoreGC(t *testing.T) {
	pct := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	})
}

func TestGCSetsServingDefaultsWhenTheEnvironmentIsSilent(t *testing.T) {
	restoreGC(t)
	undo := gc(func(string) string { return "" })
	if got := debug.SetGCPercent(serveGCPercent); got != serveGCPercent {
		t.Errorf("GC percent = %d, want %d", got, serveGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != serveMemoryCap {
		t.Errorf("memory limit = %d, want %d", got, serveMemoryCap)
	}
	undo()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after undo: GC percent = %d, want the previous 100", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after undo: memory limit = %d, want the previous (none)", got)
	}
}

func TestGCLeavesWhatTheOperatorChose(t *testing.T) {
	restoreGC(t)
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	defer gc(func(k string) string { return map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}[k] })()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GC percent = %d, want the operator's 150", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("memory limit = %d, want the operator's 1 GiB", got)
	}
}
