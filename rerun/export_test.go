package rerun

import (
	"context"
	"time"
)

// Round runs one round of r (a search for pending re-runs and their
// starts), for the tests and the benchmark of the round.
func Round(ctx context.Context, r *Runner) time.Duration { return r.round(ctx) }
