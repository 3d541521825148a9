package rerun

import (
	"cmp"
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
)

// Round runs one round of r (a search for pending re-runs and their
// starts, one after another as the loop's one slot runs them; a call
// Begin drops ends it) and says when to look again, for the tests and the
// benchmark of the round.
func Round(ctx context.Context, r *Runner) time.Duration {
	found, next := r.look(ctx)
	for _, c := range found {
		if run, _ := c.Begin(ctx); !run {
			break
		}
		next = sooner(next, c.Run(ctx))
		c.Ended()
	}
	return cmp.Or(next, r.opts.Interval)
}

// RunLooks runs r as Run does, telling looked before each look of its
// loop.
func RunLooks(ctx context.Context, r *Runner, looked func()) {
	r.loop().Run(ctx, func(ctx context.Context) ([]calls.Call, time.Duration) {
		looked()
		return r.look(ctx)
	})
}
