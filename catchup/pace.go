package catchup

import (
	"context"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The one pace of the resume calls: the store's turn (keystore/pace.go).
// Every call to n8n takes one, a resume's first call together with a
// slot of its destination, which it holds until its execution finished;
// a retry takes a turn of the rate in the same slot. A call that finds
// every slot held waits until this process frees one (the store's
// PaceFreed) or, for another guard's, until Poll has passed.

// turnRequest asks for the turn of a claimed key's call; held is the
// turn of its earlier call (nil: the first).
func (r *Runner) turnRequest(rec *keystore.Record, held *keystore.Turn) keystore.TurnRequest {
	// A slot is held as long as this guard may count the call in flight:
	// the retries within the claim, then the woken bound (awaitFinish),
	// and its last wait to spare. It frees earlier when the key is no
	// longer resumed (keystore.ResumeInFlight).
	return keystore.TurnRequest{Destination: rec.Destination, Namespace: rec.Namespace, Key: rec.Key,
		Hold: r.opts.Claim + r.wokenBound(rec.Namespace) + r.opts.Interval, Held: held, Ahead: r.opts.Store.PaceAhead()}
}

// awaitTurn waits until the call req asks for may go and takes its turn
// in the store (keystore.DecideResumeTurn): the guards sharing the store
// keep one rate and one in-flight limit for the destination, the approval
// resumer's calls included. false: ctx ended, or no turn came free within
// rec's claim.
func (r *Runner) awaitTurn(ctx context.Context, req keystore.TurnRequest, rec *keystore.Record) (keystore.Turn, bool) {
	for ctx.Err() == nil {
		if rec.ResumeClaimUntil != nil && !r.now().Before(rec.ResumeClaimUntil.Add(-r.opts.Claim/4)) {
			// Waited for a turn until the claim nearly lapsed: the key is
			// claimed and tried again.
			r.log.Warn("catch-up: no resume turn came free within the claim; the key is tried again (other guards hold every slot of the destination, or a guard that died holds them until their keys' executions end)",
				"destination", req.Destination, "namespace", rec.Namespace, "key", rec.Key, "hold", req.Hold.String())
			return keystore.Turn{}, false
		}
		freed := r.opts.Store.PaceFreed() // before the look: a slot freed meanwhile wakes this wait
		t, ok, wait, err := r.opts.Store.TakeResumeTurn(ctx, req)
		switch {
		case err != nil:
			r.log.Warn("catch-up: cannot take a resume turn; trying again", "destination", req.Destination, "err", err)
			r.opts.Sleep(ctx, r.opts.Interval)
		case ok:
			if r.opts.paced != nil {
				r.opts.paced(req.Destination, t.At)
			}
			if d := t.At.Sub(r.now()); d > 0 {
				r.opts.Sleep(ctx, d) // a turn given ahead (TurnRequest.Ahead): the call goes at its At
			}
			return t, true
		case wait > 0: // the rate: a freed slot does not shorten it
			r.opts.Sleep(ctx, wait)
		default: // every slot held, or a call not ended yet, maybe another guard's
			calls.Wait(ctx, r.opts.Sleep, r.opts.Poll, freed)
		}
	}
	return keystore.Turn{}, false
}

// releaseTurn gives a turn's in-flight slot back; one not given back
// frees itself when its key's resume ends, or at its hold's end.
func (r *Runner) releaseTurn(ctx context.Context, dest string, t keystore.Turn) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.opts.Store.ReleaseResumeTurn(rctx, t); err != nil {
		r.log.Warn("catch-up: a resume turn could not be released; its slot frees itself", "destination", dest, "until", t.Until, "err", err)
	}
}

// callPace is the turn of one resume's calls, on the goroutine that
// makes them (resumeOne).
type callPace struct {
	r     *Runner
	rec   *keystore.Record
	turn  keystore.Turn  // the latest call's
	calls int            // calls made
	ends  sync.WaitGroup // the ends being told (ended), waited for by done
}

// take waits for the next call's turn: the first call goes on the turn
// awaitTurn took with the slot, each further one takes its own. false:
// none came within the claim, or ctx ended. A nil pace (a key without a
// destination) takes none.
func (p *callPace) take(ctx context.Context) bool {
	if p == nil {
		return true
	}
	if p.calls > 0 {
		t, ok := p.r.awaitTurn(ctx, p.r.turnRequest(p.rec, &p.turn), p.rec)
		if !ok {
			return false
		}
		p.turn = t
	}
	p.calls++
	return true
}

// ended tells the store the call returned: the rate's window counts a
// call from its turn to its end (keystore.EndCall). Not told, the call
// counts until keystore.ResumeCallBound. It is told beside the answer's
// record (a commit less on the way of each resume); done waits for it.
func (p *callPace) ended(ctx context.Context) {
	if p == nil {
		return
	}
	t := p.turn
	p.ends.Add(1)
	go func() {
		defer p.ends.Done()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := p.r.opts.Store.EndResumeCall(rctx, t); err != nil {
			p.r.log.Warn("catch-up: the end of a resume call could not be recorded; it counts in the destination's rate a while longer", "destination", t.Destination, "err", err)
		}
	}()
}

// done waits until every end was told.
func (p *callPace) done() {
	if p != nil {
		p.ends.Wait()
	}
}
