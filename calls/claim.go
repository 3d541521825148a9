package calls

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A claim in the store is held for as long as its call is in flight
// (keystore/claim.go, keystore/check.go): from the claim to n8n's answer
// recorded, through the wait for a turn, the calls and their backoff, a
// Keeper extends it whenever less than half a claim is left on the
// worker's clock. A guard that dies stops extending it, and it lapses a
// claim later at most; a guard that stops (SIGTERM) hands back the claims
// whose call it did not make, so their keys wait for no lapse. A claim
// whose extensions keep failing (the store cannot be written) would lapse
// under its call and let a second guard call again: the keeper says so
// (Lapses) a margin before its until, so the holder cuts its call first.

// Claim is one key's claim, as the store gave it, and the store's two
// primitives on it; the holder names the claim by the until it last got.
type Claim struct {
	Until  time.Time     // zero: nothing to keep (the store gave no claim)
	Length time.Duration // how long a claim holds from its extension
	// Extend extends the claim held until held: its new until; ok false
	// when it is no longer this guard's (answered, lost, taken after a
	// lapse).
	Extend func(ctx context.Context, held time.Time) (until time.Time, ok bool, err error)
	// Release hands back the claim held until held.
	Release func(ctx context.Context, held time.Time) (ok bool, err error)
	// Every is how often the keeper looks at Clock.
	Every time.Duration
	Clock keystore.Clock
	// Log says which key (its attributes), What which claim ("catch-up:
	// a resume claim"), in the keeper's log lines.
	Log  *slog.Logger
	What string
}

// Claims is how one worker keeps the claims a store gives it on its
// keys: each holds Length from its extension, its keeper looks at Clock
// every Every, and What names them in the log ("catch-up: a resume
// claim").
type Claims struct {
	Length, Every time.Duration
	Clock         keystore.Clock
	What          string
}

// Keep keeps one key's claim while its call is in flight (Keep): until
// is the claim as the store gave it (nil: none, nothing to keep), extend
// and release are the store's primitives on that key's claim, and log
// names the key.
func (cs Claims) Keep(ctx context.Context, log *slog.Logger, until *time.Time,
	extend func(ctx context.Context, held time.Time, length time.Duration) (time.Time, bool, error),
	release func(ctx context.Context, held time.Time) (bool, error)) *Keeper {
	c := Claim{Length: cs.Length, Every: cs.Every, Clock: cs.Clock, Log: log, What: cs.What, Release: release,
		Extend: func(ctx context.Context, held time.Time) (time.Time, bool, error) {
			return extend(ctx, held, cs.Length)
		}}
	if until != nil {
		c.Until = *until
	}
	return Keep(ctx, c)
}

// ErrLapsing is the cause of a context Within ended: the claim it was
// bound to was about to lapse.
var ErrLapsing = errors.New("the claim is about to lapse (it could not be extended)")

// Keeper keeps one claim. held is written by its keep goroutine until
// done is closed, and read by the call's goroutine after Stop.
type Keeper struct {
	c       Claim
	cancel  context.CancelFunc
	done    chan struct{}
	held    time.Time     // the claim's until as the store last gave it
	lapses  chan struct{} // closed by keep once held is within margin of Clock
	lapsing sync.Once
	once    sync.Once
}

// Keep starts keeping c until Stop or HandBack.
func Keep(ctx context.Context, c Claim) *Keeper {
	kctx, cancel := context.WithCancel(ctx)
	k := &Keeper{c: c, cancel: cancel, done: make(chan struct{}), held: c.Until, lapses: make(chan struct{})}
	if c.Until.IsZero() {
		close(k.done)
		return k
	}
	go k.keep(kctx)
	return k
}

// margin is how long before its until a claim not extended is said to
// lapse (Lapses): the holder's cut call must end, and the keeper look
// again (Every), before another guard may take the claim.
func (k *Keeper) margin() time.Duration { return k.c.Length / 4 }

// Lapses is closed once the claim kept is within a margin of its until
// on the worker's clock without an extension (the store could not be
// written): the holder must end its call, or it outlives its claim and
// another guard may make it again. A later extension does not reopen it.
func (k *Keeper) Lapses() <-chan struct{} { return k.lapses }

// Within is ctx, ended (cause ErrLapsing) once the claim Lapses: a call
// made under it never outlives the claim that holds it.
func (k *Keeper) Within(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-k.lapses:
			cancel(ErrLapsing)
		case <-wctx.Done():
		}
	}()
	return wctx, func() { cancel(context.Canceled) }
}

// keep extends the claim once less than half a claim is left, until ctx
// ends or the claim is no longer this guard's, and closes lapses once
// less than a margin is left. It looks at the clock every Every and never
// waits through a worker's Sleep: it is no wait of the call, and a
// controlled clock moves only for those.
func (k *Keeper) keep(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(k.c.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		left := k.held.Sub(k.c.Clock())
		if left <= k.margin() {
			k.lapsing.Do(func() { close(k.lapses) })
		}
		if left > k.c.Length/2 {
			continue
		}
		// The extension runs to its end even when a stop comes meanwhile:
		// the claim it wrote is the one HandBack must name, or the store
		// refuses the hand-back and the key waits for the new claim's lapse.
		// A hung store is not waited for past the margin, which Lapses
		// must not miss.
		wait := 10 * time.Second
		if w := left - k.margin(); w > 0 {
			wait = min(wait, w)
		}
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
		until, ok, err := k.c.Extend(ectx, k.held)
		cancel()
		switch {
		case err == nil && ok:
			k.held = until
		case err == nil: // answered, lost, or taken after a lapse: nothing to keep
			return
		case ctx.Err() == nil:
			k.c.Log.Warn(k.c.What+" could not be extended; trying again", "err", err)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// Stop ends the keeping and waits for it; the claim stays as it is (the
// call's answer, recorded next, ends it).
func (k *Keeper) Stop() {
	k.once.Do(k.cancel)
	<-k.done
}

// HandBack stops keeping the claim and gives it back: its call was not
// made (or its answer is not to be recorded), so the key waits again at
// once for the next claim (this guard's after a restart, or another
// guard's) instead of the claim's lapse. One not handed back (the store
// failed) lapses as before.
func (k *Keeper) HandBack(ctx context.Context) {
	k.Stop()
	if k.held.IsZero() {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	released, err := k.c.Release(rctx, k.held)
	if err != nil || !released {
		k.c.Log.Warn(k.c.What+" whose call was not made could not be handed back; it lapses", "until", k.held, "err", err)
	}
}
