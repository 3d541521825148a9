package calls

import (
	"cmp"
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Loop is the loop of a worker that calls n8n: it looks for work (a Look)
// at each commit of this process's store, and every Interval for another
// guard's commits on a shared PostgreSQL, and runs each call it finds in a
// goroutine of its own, at most Slots at once and never two for one key.
// A call that cannot start for want of a slot starts as soon as one is
// freed, without waiting for the next look.
type Loop struct {
	// Commits wakes the loop at each commit of this process's store (nil:
	// Interval alone).
	Commits keystore.CommitFeed
	// Wake wakes the loop besides the commits (a worker's Kick); nil: none.
	Wake <-chan struct{}
	// Interval is how often the loop looks when nothing woke it (default
	// 1 s).
	Interval time.Duration
	// Slots bounds the calls in flight (default 1; Unbounded: no bound,
	// for a loop whose calls are workers of their own).
	Slots int
	// LookAtEnds: a call's end wakes the loop at once (its answer may
	// change what the next look finds: a catch-up probe's closes its
	// destination's breaker); without it an end wakes it at its again.
	LookAtEnds bool
	// Held, when set, is asked before each wait: true when the work the
	// last look found is held (a breaker refused its claim), and then a
	// commit does not end the wait, only a call's end, a Wake, the next
	// look's time or ctx's: a busy store's commits would otherwise have
	// the loop look, and claim in vain, at each one.
	Held func() bool
	// Sleep waits d or until ctx ends (default: a timer): the wait for the
	// next look, so that a worker on a controlled clock moves it.
	Sleep func(ctx context.Context, d time.Duration)
}

// Unbounded as a Loop's Slots: no bound on the calls in flight; a call's
// end may then wait for the loop to take it.
const Unbounded = -1

// A Call is one call a look found.
type Call struct {
	// Key names what the call is for (a key, an execution): a call whose
	// key has a call of this loop in flight is not started again.
	Key string
	// Begin, when set, runs on the loop's goroutine once the call has a
	// slot, before Run goes: what must happen in the look's order (the
	// catch-up's claim of its probe, the oldest key). run: Run goes;
	// more: the look's later calls may start (false: they are dropped
	// until the next look).
	Begin func(ctx context.Context) (run, more bool)
	// Run makes the call, in a goroutine of its own; again is how soon
	// after its end the loop looks again (0: at its next wake).
	Run func(ctx context.Context) (again time.Duration)
	// Ended, when set, runs on the loop's goroutine once it took the
	// call's end: where a worker takes the call's result (which Run left
	// in the call's own variables) into the state that goroutine alone
	// writes.
	Ended func()
}

// A Look finds the calls to start now, and how soon to look again when
// nothing wakes the loop (0, or longer than Interval: Interval).
type Look func(ctx context.Context) (calls []Call, next time.Duration)

// ended is a call's report to its loop: its key, when to look again, and
// its Ended.
type ended struct {
	key   string
	again time.Duration
	taken func()
}

// run is one Run's state. Its fields are written by Run's goroutine only
// (and the Look, Begin and Ended it runs); the calls' goroutines share
// nothing with it but the reports they send on ends.
type run struct {
	loop    Loop
	pending map[string]bool // keys whose call was started and has not reported its end
	// ends: the calls' reports, room for one per slot, so that a call
	// never waits for the loop (Unbounded: none).
	ends chan ended
	// next: when to look again without a wake (the look's, or a call's
	// again), zero: Interval after the last look.
	next time.Time
}

// Run looks and starts calls until ctx ends, and returns once every call
// it started has ended.
func (l Loop) Run(ctx context.Context, look Look) {
	l.Interval = cmp.Or(max(l.Interval, 0), time.Second)
	if l.Slots != Unbounded {
		l.Slots = cmp.Or(max(l.Slots, 0), 1)
	}
	if l.Sleep == nil {
		l.Sleep = Sleep
	}
	var commits <-chan struct{} // nil without a feed: never ready
	if l.Commits != nil {
		c, stop := l.Commits.Commits() // before the first look: no commit falls between
		defer stop()
		commits = c
	}
	r := &run{loop: l, pending: map[string]bool{}, ends: make(chan ended, max(l.Slots, 0))}
	defer r.drain()
	for ctx.Err() == nil {
		calls, next := look(ctx)
		r.next = time.Now().Add(l.Interval)
		if next > 0 && next < l.Interval {
			r.next = time.Now().Add(next)
		}
		for _, c := range calls {
			if !r.start(ctx, c) {
				break
			}
		}
		if ctx.Err() == nil { // a look may end the loop: no wait then
			r.await(ctx, commits)
		}
	}
}

// start starts c in a goroutine of its own once a slot is free and its
// Begin let it, unless its key's call is in flight. false: the look's
// later calls are not started (ctx ended, or Begin said so).
func (r *run) start(ctx context.Context, c Call) (more bool) {
	if r.pending[c.Key] {
		return true // its call of this guard is in flight
	}
	if ctx.Err() != nil || !r.awaitSlot(ctx) {
		return false
	}
	run, more := true, true
	if c.Begin != nil {
		if run, more = c.Begin(ctx); !run {
			return more
		}
	}
	r.pending[c.Key] = true
	go func() {
		again := c.Run(ctx)
		r.ends <- ended{key: c.Key, again: again, taken: c.Ended}
	}()
	return more
}

// awaitSlot waits until fewer than Slots calls are in flight; false: ctx
// ended.
func (r *run) awaitSlot(ctx context.Context) bool {
	for r.loop.Slots != Unbounded && len(r.pending) >= r.loop.Slots {
		select {
		case e := <-r.ends:
			r.end(e)
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// await waits for a commit (unless Held), a Wake, the next look's time
// (Sleep), a call's end with LookAtEnds, or ctx's end, taking the calls'
// reports meanwhile.
func (r *run) await(ctx context.Context, commits <-chan struct{}) {
	if r.loop.Held != nil && r.loop.Held() {
		commits = nil
	}
	for {
		wctx, cancel := context.WithCancel(ctx)
		slept := make(chan struct{})
		d := time.Until(r.next) // read here: r.next is Run's goroutine's
		go func() {
			defer close(slept)
			r.loop.Sleep(wctx, d)
		}()
		woken := true
		select {
		case <-ctx.Done():
		case <-commits:
		case <-r.loop.Wake:
		case <-slept:
		case e := <-r.ends:
			r.end(e)
			woken = r.loop.LookAtEnds // else the next look may be sooner now
		}
		cancel()
		<-slept
		if woken {
			return
		}
	}
}

// Sleep waits d or until ctx ends, on a timer: the default Sleep of a
// Loop, and of a worker's other waits.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Wait waits d on sleep (a Loop's Sleep), or until wake is ready or ctx
// ends: the wait of a call for what its loop does not see (a freed slot
// of the store's pace), on the worker's clock.
func Wait(ctx context.Context, sleep func(ctx context.Context, d time.Duration), d time.Duration, wake <-chan struct{}) {
	wctx, cancel := context.WithCancel(ctx)
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		sleep(wctx, d)
	}()
	select {
	case <-wake:
	case <-slept:
	}
	cancel()
	<-slept
}

// end takes a call's report.
func (r *run) end(e ended) {
	delete(r.pending, e.key)
	if e.taken != nil {
		e.taken()
	}
	if at := time.Now().Add(e.again); e.again > 0 && at.Before(r.next) {
		r.next = at
	}
}

// drain waits until every call started has ended.
func (r *run) drain() {
	for len(r.pending) > 0 {
		r.end(<-r.ends)
	}
}
