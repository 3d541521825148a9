package keystore

import (
	"sync"
	"time"
)

// CommitFeed is how the background workers of a process (catch-up,
// notify, checks) hear that its store committed a write, instead of
// reading the store on a fast timer.
type CommitFeed interface {
	// Commits subscribes to the writes this process commits in the store:
	// the channel receives after one or more commits (a burst makes one
	// receive, at most one per CommitCooldown); stop ends the
	// subscription. Another process's commits on the same database are
	// not seen: a worker keeps its ticker for them.
	Commits() (wake <-chan struct{}, stop func())
}

// CommitCooldown is the least time between two wakes of one subscriber:
// a busy store commits every few milliseconds, and a worker woken by each
// commit would read the store as often as it is written.
const CommitCooldown = 100 * time.Millisecond

// CommitSignal is the CommitFeed a store keeps: Notify after each commit
// that changed something. The zero value is ready to use.
type CommitSignal struct {
	mu   sync.Mutex
	subs map[*commitSub]struct{}
}

type commitSub struct {
	ch    chan struct{} // buffer 1: a wake not yet taken holds the later ones
	last  time.Time     // when ch was last sent to
	timer *time.Timer   // a wake held back by the cooldown (nil: none)
}

// Notify wakes every subscriber, at once or when its cooldown ends. It
// never blocks on a subscriber.
func (s *CommitSignal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		s.wake(sub, time.Now())
	}
}

// wake sends to sub, or schedules the send at the end of its cooldown;
// s.mu is held.
func (s *CommitSignal) wake(sub *commitSub, now time.Time) {
	if sub.timer != nil {
		return // a wake is scheduled already
	}
	if wait := sub.last.Add(CommitCooldown).Sub(now); wait > 0 {
		sub.timer = time.AfterFunc(wait, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if _, ok := s.subs[sub]; ok {
				sub.timer = nil
				s.wake(sub, time.Now())
			}
		})
		return
	}
	sub.last = now
	select {
	case sub.ch <- struct{}{}:
	default:
	}
}

// Subscribe implements CommitFeed.Commits.
func (s *CommitSignal) Subscribe() (<-chan struct{}, func()) {
	sub := &commitSub{ch: make(chan struct{}, 1)}
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[*commitSub]struct{}{}
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	return sub.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, sub)
		if sub.timer != nil {
			sub.timer.Stop()
		}
	}
}
