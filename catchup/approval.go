package catchup

import (
	"context"
	"slices"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The approval resumer: a key of a namespace that requires approval
// (keystore/approval.go) is parked until a person decides; once approved
// or rejected its execution is resumed the way the catch-up resumes one
// (claim in the store, call the resume URL with backoff, record n8n's
// answer). An approved key's claim goes through its destination's breaker;
// a rejected key's does not (its execution writes nothing). Approvals are
// a person's pace, so the keys are looked at every Interval, each decided
// key resumed at once.

// gatedNamespaces are the configured namespaces that require approval.
func gatedNamespaces(p keystore.Policies) []string {
	var out []string
	for ns, np := range p.Namespaces {
		if np.Approval.Required {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// decided: the key was approved or rejected and its execution was not
// resumed yet, nor is being resumed by any guard.
func decided(rec *keystore.Record, now time.Time) bool {
	return (rec.Reason == keystore.ReasonApproved || rec.Reason == keystore.ReasonApprovalRejected) &&
		rec.ResumeSentAt == nil && (rec.ResumeClaimUntil == nil || !now.Before(*rec.ResumeClaimUntil))
}

// runApprovals resumes decided keys of the gated namespaces until ctx ends.
// Each resume runs in a goroutine that reports its key on ended when it
// is over; the set of keys being resumed is this loop's alone.
func (r *Runner) runApprovals(ctx context.Context) {
	gated := gatedNamespaces(r.opts.Policies)
	if len(gated) == 0 {
		return
	}
	pending := map[string]bool{} // keys being resumed by this guard
	ended := make(chan string)
	defer func() {
		for len(pending) > 0 {
			delete(pending, <-ended)
		}
	}()
	for ctx.Err() == nil {
		for collected := true; collected; {
			select {
			case id := <-ended:
				delete(pending, id)
			default:
				collected = false
			}
		}
		for _, rec := range r.decidedKeys(ctx, gated) {
			if id := id(rec); !pending[id] {
				pending[id] = true
				go func() {
					r.resumeDecided(ctx, rec)
					ended <- id
				}()
			}
		}
		r.opts.Sleep(ctx, r.opts.Interval)
	}
}

// decidedKeys lists the decided keys of the gated namespaces (decided):
// those whose execution is to be resumed.
func (r *Runner) decidedKeys(ctx context.Context, gated []string) []*keystore.Record {
	var out []*keystore.Record
	for _, ns := range gated {
		q := keystore.ListQuery{Namespace: ns, State: keystore.StateParked, Limit: 500}
		for ctx.Err() == nil {
			page, err := r.opts.Store.List(ctx, q)
			if err != nil {
				r.log.Warn("approvals: cannot list the parked keys; trying again", "namespace", ns, "err", err)
				break
			}
			for _, rec := range page.Items {
				if decided(rec, r.now()) {
					out = append(out, rec)
				}
			}
			if q.Cursor = page.NextCursor; q.Cursor == "" {
				break
			}
		}
	}
	return out
}

// resumeDecided claims a decided key and resumes its execution.
func (r *Runner) resumeDecided(ctx context.Context, rec *keystore.Record) {
	claimed, ok, err := r.opts.Store.ClaimResume(ctx, rec.Namespace, rec.Key, r.opts.Claim)
	if err != nil {
		r.log.Warn("approvals: cannot claim a decided key; trying again", "namespace", rec.Namespace, "key", rec.Key, "err", err)
		return
	}
	if !ok {
		return // its destination is paused, or another guard resumes it
	}
	// Its call takes the destination's turn like the catch-up's: a bulk
	// approval of many events does not wake them all at once.
	res := r.resumeClaimed(ctx, claimed, func(time.Time) {
		r.log.Info("approvals: resuming the execution of a decided key", "namespace", rec.Namespace, "key", rec.Key,
			"decision", string(claimed.Reason), "by", claimed.ResolvedBy)
	})
	if res.outcome == foundLost {
		r.logLost(res.rec, res.detail) // each one: a person decided about each
	}
}
