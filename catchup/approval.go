package catchup

import (
	"context"
	"slices"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The approval resumer: a key of a namespace that requires approval
// (keystore/approval.go) is parked until a person decides; once approved
// or rejected its execution is resumed the way the catch-up resumes one
// (claim in the store, call the resume URL with backoff, record n8n's
// answer). An approved key's claim goes through its destination's breaker;
// a rejected key's does not (its execution writes nothing). The resumer
// reads the approved and rejected keys from the stage index
// (KeysAtStage), never the keys that wait for a person, and looks again
// at each commit of this process's store (a decision is one), when a
// claim it saw in flight lapses, an Interval after a resume of its own
// ended (it may end with its key still decided), and every approvalLook
// for another guard's decisions on a shared PostgreSQL. Its loop is
// calls'.

// approvalLook is how often the resumer looks when nothing woke it (or
// Interval, when longer): the fallback for a decision made on another
// guard whose own resumer stopped. A decision on this guard wakes it at
// once.
const approvalLook = time.Minute

// decidedStages are the stages of a decided key (keystore/stage.go).
var decidedStages = []keystore.Stage{keystore.PhaseApproved, keystore.PhaseRejected}

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

// approvalsAtOnce bounds the decided keys being resumed at once by one
// guard; their calls keep the destination's pace (the store's turn).
const approvalsAtOnce = 64

// runApprovals resumes decided keys of the gated namespaces until ctx ends
// (calls.Loop: woken by the commits of their decided keys, a decision
// among them).
func (r *Runner) runApprovals(ctx context.Context) {
	gated := gatedNamespaces(r.opts.Policies)
	if len(gated) == 0 {
		return
	}
	r.approvalLoop(gated).Run(ctx, r.lookApprovals(gated))
}

// approvalLoop is the approval resumer's loop: woken by the commits of
// the gated namespaces' keys at a decided stage alone (a decision, a
// claim handed back or lapsed and written again, the resumer's own
// claims and answers), so a busy store's other writes (reserves of other
// namespaces, keys awaiting approval) do not make it read the decided
// keys.
func (r *Runner) approvalLoop(gated []string) calls.Loop {
	commits := keystore.CommitsOf(r.opts.Store, func(k keystore.CommittedKey) bool {
		return slices.Contains(decidedStages, k.Stage) && slices.Contains(gated, k.Namespace)
	})
	return calls.Loop{Commits: commits, Interval: max(approvalLook, r.opts.Interval), Slots: approvalsAtOnce, Sleep: r.opts.Sleep}
}

// lookApprovals is the approval resumer's look: a call for each decided
// key of the gated namespaces, and when a claim in flight lapses.
func (r *Runner) lookApprovals(gated []string) calls.Look {
	return func(ctx context.Context) ([]calls.Call, time.Duration) {
		keys, lapse := r.decidedKeys(ctx, gated)
		out := make([]calls.Call, 0, len(keys))
		for _, rec := range keys {
			out = append(out, calls.Call{Key: id(rec), Run: func(ctx context.Context) time.Duration {
				r.resumeDecided(ctx, rec)
				// It may end with its key still decided (its destination
				// paused, n8n to be asked again): looked at again as a
				// refused claim is tried again.
				return r.opts.Interval
			}})
		}
		return out, lapse
	}
}

// decidedKeys reads the decided keys of the gated namespaces (decided)
// from the stage index: those whose execution is to be resumed, and how
// long until the soonest claim in flight of another one lapses (0: none
// is in flight).
func (r *Runner) decidedKeys(ctx context.Context, gated []string) ([]*keystore.Record, time.Duration) {
	var out []*keystore.Record
	var lapse time.Duration
	now := r.now()
	for _, ns := range gated {
		for _, stage := range decidedStages {
			for rec, err := range keystore.AtStage(ctx, r.opts.Store, keystore.StageQuery{Stage: stage, Namespace: ns, Limit: 500}) {
				if err != nil {
					if ctx.Err() == nil { // a guard told to stop says nothing
						r.log.Warn("approvals: cannot read the decided keys; trying again", "namespace", ns, "err", err)
					}
					break
				}
				switch {
				case decided(rec, now):
					out = append(out, rec)
				case rec.ResumeSentAt == nil && rec.ResumeClaimUntil != nil:
					if d := rec.ResumeClaimUntil.Sub(now); lapse == 0 || d < lapse {
						lapse = d
					}
				}
			}
		}
	}
	return out, lapse
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
