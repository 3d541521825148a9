package rerun_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/rerun"
)

// A grant is a commit of the store: it wakes the runner, which starts the
// re-run at once although nobody kicked it and its interval is an hour.
func TestAGrantWakesTheRunnerWithoutAKick(t *testing.T) {
	e := setup(t)
	e.atGate("k1", "41", "crm")
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour})
	e.grant("k1")
	wait(t, f, 1)
	if got := f.retries(); len(got) != 1 || got[0] != "41" {
		t.Fatalf("retries %v, want 41 once", got)
	}
}
