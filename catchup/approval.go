package catchup

import (
	"context"
	"slices"
	"sync"
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
func (r *Runner) runApprovals(ctx context.Context) {
	gated := gatedNamespaces(r.opts.Policies)
	if len(gated) == 0 {
		return
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		pending = map[string]bool{}
	)
	defer wg.Wait()
	for ctx.Err() == nil {
		for _, ns := range gated {
			cursor := ""
			for ctx.Err() == nil {
				page, err := r.opts.Store.List(ctx, keystore.ListQuery{Namespace: ns, State: keystore.StateParked, Limit: 500, Cursor: cursor})
				if err != nil {
					r.log.Warn("approvals: cannot list the parked keys; trying again", "namespace", ns, "err", err)
					break
				}
				for _, rec := range page.Items {
					id := rec.Namespace + "\x00" + rec.Key
					mu.Lock()
					mine := pending[id]
					mu.Unlock()
					if mine || !decided(rec, r.now()) {
						continue
					}
					mu.Lock()
					pending[id] = true
					mu.Unlock()
					wg.Add(1)
					go func(rec *keystore.Record) {
						defer wg.Done()
						defer func() { mu.Lock(); delete(pending, id); mu.Unlock() }()
						r.resumeDecided(ctx, rec)
					}(rec)
				}
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
		}
		r.opts.Sleep(ctx, r.opts.Interval)
	}
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
