package tune

import (
	"runtime"
	"testing"
)

func TestProcsDoublesWhenTheEnvironmentIsSilent(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	undo := procs(func(string) string { return "" })
	if got := runtime.GOMAXPROCS(0); got != 2*before {
		t.Errorf("GOMAXPROCS = %d, want twice %d", got, before)
	}
	undo()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("after undo: GOMAXPROCS = %d, want the previous %d", got, before)
	}
}

func TestProcsLeavesWhatTheOperatorChose(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer procs(func(k string) string { return map[string]string{"GOMAXPROCS": "3"}[k] })()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS = %d, want it left at %d", got, before)
	}
}
