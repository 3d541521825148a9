package catchup

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// keepClaim starts keeping the resume claim of claimed (its
// ResumeClaimUntil, as the store gave it) while its call is in flight
// (calls.Keeper): extended whenever less than half a claim is left on the
// runner's clock, handed back when the call was not made.
func (r *Runner) keepClaim(ctx context.Context, claimed *keystore.Record) *calls.Keeper {
	ns, key := claimed.Namespace, claimed.Key
	c := calls.Claim{Length: r.opts.Claim, Every: r.opts.Interval, Clock: r.now,
		Log: r.log.With("namespace", ns, "key", key), What: "catch-up: a resume claim",
		Extend: func(ctx context.Context, held time.Time) (time.Time, bool, error) {
			return r.opts.Store.ExtendResumeClaim(ctx, ns, key, held, r.opts.Claim)
		},
		Release: func(ctx context.Context, held time.Time) (bool, error) {
			return r.opts.Store.ReleaseResumeClaim(ctx, ns, key, held)
		}}
	if claimed.ResumeClaimUntil != nil {
		c.Until = *claimed.ResumeClaimUntil
	}
	return calls.Keep(ctx, c)
}
