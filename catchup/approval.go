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
// a rejected key's does not (its execution writes nothing). The resumer
// reads the approved and rejected keys from the stage index
// (KeysAtStage), never the keys that wait for a person, and looks again
// at each commit of this process's store (a decision is one), when a
// claim it saw in flight lapses, every Interval while a resume of its own
// is in flight (it may end with its key still decided), and every
// approvalLook for another guard's decisions on a shared PostgreSQL.

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

// runApprovals resumes decided keys of the gated namespaces until ctx ends.
// Each resume runs in a goroutine that reports its key on ended when it
// is over; the set of keys being resumed is this loop's alone.
func (r *Runner) runApprovals(ctx context.Context) {
	gated := gatedNamespaces(r.opts.Policies)
	if len(gated) == 0 {
		return
	}
	commits, stop := r.opts.Store.Commits() // before the first read: no decision falls between
	defer stop()
	pending := map[string]bool{} // keys being resumed by this guard
	ended := make(chan string)
	defer func() {
		for len(pending) > 0 {
			delete(pending, <-ended)
		}
	}()
	for ctx.Err() == nil {
		keys, lapse := r.decidedKeys(ctx, gated)
		for _, rec := range keys {
			if id := id(rec); !pending[id] {
				pending[id] = true
				go func() {
					r.resumeDecided(ctx, rec)
					ended <- id
				}()
			}
		}
		wait := max(approvalLook, r.opts.Interval)
		if lapse > 0 && lapse < wait {
			wait = lapse
		}
		if len(pending) > 0 {
			// A resume in flight may end with its key still decided (its
			// destination paused, n8n to be asked again): looked at every
			// Interval meanwhile, as a claim refused is tried again.
			wait = min(wait, r.opts.Interval)
		}
		r.awaitApprovals(ctx, commits, ended, pending, wait)
	}
}

// awaitApprovals waits for a commit of the store, d (Sleep), or ctx's end;
// a resume of this guard that ends meanwhile is dropped from pending.
func (r *Runner) awaitApprovals(ctx context.Context, commits <-chan struct{}, ended <-chan string, pending map[string]bool, d time.Duration) {
	wctx, cancel := context.WithCancel(ctx)
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		r.opts.Sleep(wctx, d)
	}()
	defer func() { cancel(); <-slept }()
	for {
		select {
		case <-commits:
			return
		case <-slept:
			return
		case id := <-ended:
			delete(pending, id)
		}
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
			q := keystore.StageQuery{Stage: stage, Namespace: ns, Limit: 500}
			for ctx.Err() == nil {
				recs, err := r.opts.Store.KeysAtStage(ctx, q)
				if err != nil {
					r.log.Warn("approvals: cannot read the decided keys; trying again", "namespace", ns, "err", err)
					break
				}
				for _, rec := range recs {
					switch {
					case decided(rec, now):
						out = append(out, rec)
					case rec.ResumeSentAt == nil && rec.ResumeClaimUntil != nil:
						if d := rec.ResumeClaimUntil.Sub(now); lapse == 0 || d < lapse {
							lapse = d
						}
					}
				}
				if len(recs) < q.Limit {
					break
				}
				last := recs[len(recs)-1]
				q.AfterNamespace, q.AfterKey = last.Namespace, last.Key
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
