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
	// Slots bounds the calls in flight (default 1).
	Slots int
	// Sleep waits d or until ctx ends (default: a timer): the wait for the
	// next look, so that a worker on a controlled clock moves it.
	Sleep func(ctx context.Context, d time.Duration)
}

// A Call is one call a look found.
type Call struct {
	// Key names what the call is for (a key, an execution): a call whose
	// key has a call of this loop in flight is not started again.
	Key string
	// Run makes the call; again is how soon after its end the loop looks
	// again (0: at its next wake).
	Run func(ctx context.Context) (again time.Duration)
}

// A Look finds the calls to start now, and how soon to look again when
// nothing wakes the loop (0, or longer than Interval: Interval).
type Look func(ctx context.Context) (calls []Call, next time.Duration)

// ended is a call's report to its loop: its key, and when to look again.
type ended struct {
	key   string
	again time.Duration
}

// run is one Run's state. Its fields are written by Run's goroutine only;
// the calls' goroutines share nothing with it but the reports they send
// on ends.
type run struct {
	loop    Loop
	pending map[string]bool // keys whose call was started and has not reported its end
	// ends: the calls' reports, room for one per slot, so that a call
	// never waits for the loop.
	ends chan ended
	// next: when to look again without a wake (the look's, or a call's
	// again), zero: Interval after the last look.
	next time.Time
}

// Run looks and starts calls until ctx ends, and returns once every call
// it started has ended.
func (l Loop) Run(ctx context.Context, look Look) {
	l.Interval = cmp.Or(max(l.Interval, 0), time.Second)
	l.Slots = cmp.Or(max(l.Slots, 0), 1)
	if l.Sleep == nil {
		l.Sleep = sleep
	}
	var commits <-chan struct{} // nil without a feed: never ready
	if l.Commits != nil {
		c, stop := l.Commits.Commits() // before the first look: no commit falls between
		defer stop()
		commits = c
	}
	r := &run{loop: l, pending: map[string]bool{}, ends: make(chan ended, l.Slots)}
	defer r.drain()
	for ctx.Err() == nil {
		calls, next := look(ctx)
		r.next = time.Now().Add(l.Interval)
		if next > 0 && next < l.Interval {
			r.next = time.Now().Add(next)
		}
		for _, c := range calls {
			if r.pending[c.Key] {
				continue // its call of this guard is in flight
			}
			if !r.awaitSlot(ctx) {
				return
			}
			r.pending[c.Key] = true
			go func() {
				again := c.Run(ctx)
				r.ends <- ended{key: c.Key, again: again}
			}()
		}
		r.await(ctx, commits)
	}
}

// awaitSlot waits until fewer than Slots calls are in flight; false: ctx
// ended.
func (r *run) awaitSlot(ctx context.Context) bool {
	for len(r.pending) >= r.loop.Slots {
		select {
		case e := <-r.ends:
			r.end(e)
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// await waits for a commit, a Wake, the next look's time (Sleep) or
// ctx's end, taking the calls' reports meanwhile.
func (r *run) await(ctx context.Context, commits <-chan struct{}) {
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
			woken = false // the next look may be sooner now
		}
		cancel()
		<-slept
		if woken {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// end takes a call's report.
func (r *run) end(e ended) {
	delete(r.pending, e.key)
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
