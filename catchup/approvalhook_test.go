package catchup

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
)

// RunApprovals runs r's approval resumer alone (runApprovals), telling
// looked after each of its looks how many decided keys it found.
func RunApprovals(ctx context.Context, r *Runner, looked func(found int)) {
	gated := gatedNamespaces(r.opts.Policies)
	look := r.lookApprovals(gated)
	r.approvalLoop(gated).Run(ctx, func(ctx context.Context) ([]calls.Call, time.Duration) {
		found, next := look(ctx)
		looked(len(found))
		return found, next
	})
}
