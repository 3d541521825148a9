package catchup

import (
	"context"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A claim is held for as long as its call is in flight (keystore/claim.go):
// from the claim to n8n's answer recorded, through the wait for a turn,
// the calls and their backoff, a keeper extends it whenever less than
// half a claim is left on the runner's clock. A guard that dies stops extending it, and
// it lapses a claim later at most; a guard that stops (SIGTERM) hands
// back the claims whose call it did not make, so their keys wait for no
// lapse.

// claimKeeper keeps one key's resume claim. Its fields are written by its
// keeper goroutine (held) and read by the resume's goroutine after stop.
type claimKeeper struct {
	r       *Runner
	ns, key string
	cancel  context.CancelFunc
	done    chan struct{}
	held    time.Time // the claim's until as the store last gave it; keep's goroutine writes it until done
	once    sync.Once
}

// keepClaim starts keeping the claim of claimed (its ResumeClaimUntil, as
// the store gave it) until stop.
func (r *Runner) keepClaim(ctx context.Context, claimed *keystore.Record) *claimKeeper {
	kctx, cancel := context.WithCancel(ctx)
	k := &claimKeeper{r: r, ns: claimed.Namespace, key: claimed.Key, cancel: cancel, done: make(chan struct{})}
	if claimed.ResumeClaimUntil == nil {
		close(k.done) // nothing to keep (a store that answered without one)
		return k
	}
	k.held = *claimed.ResumeClaimUntil
	go k.keep(kctx)
	return k
}

// keep extends the claim once less than half a claim is left, until ctx
// ends or the claim is no longer this guard's (answered, lost, or taken
// after a lapse: then there is nothing to keep). It looks at the runner's
// clock every Interval and never waits through Sleep: it is no wait of
// the resume, and a controlled clock moves only for those.
func (k *claimKeeper) keep(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(k.r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if k.held.Sub(k.r.now()) > k.r.opts.Claim/2 {
			continue
		}
		// The extension runs to its end even when a stop comes meanwhile:
		// the claim it wrote is the one handBack must name, or the store
		// refuses the hand-back and the key waits for the new claim's lapse.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		until, ok, err := k.r.opts.Store.ExtendResumeClaim(ectx, k.ns, k.key, k.held, k.r.opts.Claim)
		cancel()
		switch {
		case err == nil && ok:
			k.held = until
		case err == nil: // answered, lost, or taken after a lapse: nothing to keep
			return
		case ctx.Err() == nil:
			k.r.log.Warn("catch-up: a resume claim could not be extended; trying again", "namespace", k.ns, "key", k.key, "err", err)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// stop ends the keeping and waits for it; the claim stays as it is (the
// call's answer, recorded next, ends it).
func (k *claimKeeper) stop() {
	k.once.Do(k.cancel)
	<-k.done
}

// handBack stops keeping the claim and gives it back: its call was not
// made, so the key waits again at once for the next claim (this guard's
// after a restart, or another guard's) instead of the claim's lapse. One
// not handed back (the store failed) lapses as before.
func (k *claimKeeper) handBack(ctx context.Context) {
	k.stop()
	if k.held.IsZero() {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	released, err := k.r.opts.Store.ReleaseResumeClaim(rctx, k.ns, k.key, k.held)
	if err != nil || !released {
		k.r.log.Warn("catch-up: a resume claim whose call was not made could not be handed back; it lapses", "namespace", k.ns, "key", k.key, "until", k.held, "err", err)
	}
}
