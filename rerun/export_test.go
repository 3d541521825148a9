package rerun

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
)

// Round runs one round of r (a search for pending re-runs and their
// starts), for the tests and the benchmark of the round.
func Round(ctx context.Context, r *Runner) time.Duration { return r.round(ctx) }

// RunLooks runs r as Run does, telling looked before each look of its
// loop.
func RunLooks(ctx context.Context, r *Runner, looked func()) {
	r.loop().Run(ctx, func(ctx context.Context) ([]calls.Call, time.Duration) {
		looked()
		return r.look(ctx)
	})
}
