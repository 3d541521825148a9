package catchup

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// OnPaced has f told each time a resume call takes its turn (the clock's
// reading the pace was decided on), so a test reads the pace off the
// decisions and not off when a goroutine got to run afterwards.
func OnPaced(o *Options, f func(dest string, at time.Time)) { o.paced = f }

// AwaitFinish watches the woken key rec until its execution finished or
// the woken bound passed (Runner.awaitFinish); true: the key was lost.
func AwaitFinish(r *Runner, ctx context.Context, rec *keystore.Record) bool {
	return r.awaitFinish(ctx, rec)
}

// OverduePasses returns the passes of reportOverdue of one worker of
// dest, made once: each reports at now and says how many parked attempts
// the worker keeps as handed to the store.
func OverduePasses(r *Runner, dest string) func(ctx context.Context, now time.Time) (kept int) {
	w := &worker{r: r, dest: dest, dp: r.opts.Policies.Destination(dest)}
	return func(ctx context.Context, now time.Time) int {
		w.reportOverdue(ctx, now)
		return len(w.overdue)
	}
}
