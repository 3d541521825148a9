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

// KeyedCommitFeed is the commit signal that says which keys committed,
// so that a worker waiting for some keys (a namespace's, a destination's)
// is woken by their commits only and need not read the store at the
// others.
type KeyedCommitFeed interface {
	// CommittedKeys subscribes to the keys this process commits that
	// match (nil: every key); like Commits, a burst makes one wake, at
	// most one per CommitCooldown. A commit that does not say its keys
	// wakes every keyed subscriber, and Take then answers all.
	CommittedKeys(match func(CommittedKey) bool) *KeyedCommits
}

// CommittedKey is one key a commit wrote, with the destination its record
// names and the stage it left the key at; a commit of a breaker alone (a
// maintenance window, a reset) names only its Destination.
type CommittedKey struct {
	Namespace, Key string
	Destination    string
	// Stage is the key's stored stage after the commit (stage.go): a
	// worker that acts on some stages is woken by their keys alone.
	Stage Stage
}

// Committed lists the keys and breakers st writes, for
// CommitSignal.Notify; nil when it writes neither (events alone).
func (st Step) Committed() []CommittedKey {
	var out []CommittedKey
	if r := st.Record; r != nil {
		// StageOf, as the store stores it: r.Stage may still be the
		// loaded record's until the store writes r.
		out = append(out, CommittedKey{r.Namespace, r.Key, r.Destination, StageOf(r)})
	}
	// A breaker is named beside a record of its own destination only when
	// its state moved (a probe's complete closed it, a failure opened it):
	// a worker that waits for a destination (re-runs) is woken by that,
	// not by every write through it.
	if b := st.Breaker; b != nil && (st.Record == nil || b.Destination != st.Record.Destination || st.movesBreaker()) {
		out = append(out, CommittedKey{Destination: b.Destination})
	}
	return out
}

// movesBreaker: st opens, closes or narrows its breaker (it writes the
// event that says so).
func (st Step) movesBreaker() bool {
	for _, ev := range st.Events {
		switch ev.Kind {
		case EventBreakerOpened, EventBreakerClosed, EventBreakerNarrowed:
			return true
		}
	}
	return false
}

// maxHeldKeys bounds the keys a keyed subscriber that does not take them
// holds; past it, Take answers all (read the store).
const maxHeldKeys = 1024

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

	keyed bool                    // a KeyedCommits: woken only by the keys it matches
	match func(CommittedKey) bool // nil: every key
	keys  []CommittedKey          // matched since the last Take
	all   bool                    // a commit since the last Take did not say its keys, or too many to hold
}

// Notify wakes every subscriber, at once or when its cooldown ends. keys
// are what the commit wrote (none: it does not say; every keyed
// subscriber is woken). It never blocks on a subscriber.
func (s *CommitSignal) Notify(keys ...CommittedKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for sub := range s.subs {
		if sub.keyed && !sub.hold(keys) {
			continue
		}
		s.wake(sub, now)
	}
}

// hold keeps the keys of a commit that sub matches and says whether any
// did; s.mu is held.
func (sub *commitSub) hold(keys []CommittedKey) bool {
	if len(keys) == 0 {
		sub.all, sub.keys = true, nil
		return true
	}
	matched := false
	for _, k := range keys {
		if sub.match != nil && !sub.match(k) {
			continue
		}
		matched = true
		switch {
		case sub.all:
		case len(sub.keys) == maxHeldKeys:
			sub.all, sub.keys = true, nil
		default:
			sub.keys = append(sub.keys, k)
		}
	}
	return matched
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
	return sub.ch, s.add(sub)
}

// KeyedCommits is a subscription that hears which keys committed.
type KeyedCommits struct {
	C    <-chan struct{} // receives when a matching key (or a commit that did not say its keys) committed
	Stop func()          // ends the subscription
	s    *CommitSignal
	sub  *commitSub
}

// Take returns the matching keys committed since the last Take, in the
// order of their commits (a key may come more than once); all says a
// commit did not say its keys, or more came than are held: read the store.
func (k *KeyedCommits) Take() (keys []CommittedKey, all bool) {
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	keys, all = k.sub.keys, k.sub.all
	k.sub.keys, k.sub.all = nil, false
	return keys, all
}

// CommitsOf is the CommitFeed of the keys of feed that match: a worker
// that acts on some keys (a stage, a namespace) is woken by their commits
// alone, and by a commit that does not say its keys, and need not read
// the store at the others. The keys are not taken: past maxHeldKeys the
// subscription holds none.
func CommitsOf(feed KeyedCommitFeed, match func(CommittedKey) bool) CommitFeed {
	return matchedFeed{feed, match}
}

type matchedFeed struct {
	feed  KeyedCommitFeed
	match func(CommittedKey) bool
}

func (m matchedFeed) Commits() (<-chan struct{}, func()) {
	k := m.feed.CommittedKeys(m.match)
	return k.C, k.Stop
}

// SubscribeKeys implements KeyedCommitFeed.CommittedKeys.
func (s *CommitSignal) SubscribeKeys(match func(CommittedKey) bool) *KeyedCommits {
	sub := &commitSub{ch: make(chan struct{}, 1), keyed: true, match: match}
	return &KeyedCommits{C: sub.ch, Stop: s.add(sub), s: s, sub: sub}
}

// add subscribes sub and returns its stop.
func (s *CommitSignal) add(sub *commitSub) func() {
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[*commitSub]struct{}{}
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, sub)
		if sub.timer != nil {
			sub.timer.Stop()
		}
	}
}
