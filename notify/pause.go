package notify

import (
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// slackPause is the circuit breaker in front of Slack. Once a call gets no
// answer at all, every call is held until the pause ends; then one call
// goes through as a probe. The first pause is short (defaultFirstPause,
// 10–15 s) so a blip costs seconds, not minutes; each failed probe doubles
// it up to the configured cap; any answer of Slack resets it.
//
// It runs on the service's clock, so tests move time instead of sleeping.
type slackPause struct {
	mu      sync.Mutex
	b       *backoff.ExponentialBackOff
	until   time.Time // zero: closed
	current time.Duration
	onOpen  func(open bool)
}

func newSlackPause(first, max time.Duration, onOpen func(open bool)) *slackPause {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     min(first, max),
		RandomizationFactor: 0.2,
		Multiplier:          2,
		MaxInterval:         max,
	}
	b.Reset()
	return &slackPause{b: b, onOpen: onOpen}
}

// allow reports whether a call may go out at now.
func (p *slackPause) allow(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.until.IsZero() || !now.Before(p.until)
}

// open reports whether Slack is considered unreachable.
func (p *slackPause) open() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.until.IsZero()
}

// unreachable starts the next, longer pause and returns its length.
func (p *slackPause) unreachable(now time.Time) time.Duration {
	p.mu.Lock()
	d := min(p.b.NextBackOff(), p.b.MaxInterval)
	p.until, p.current = now.Add(d), d
	p.mu.Unlock()
	p.onOpen(true)
	return d
}

// answered closes the breaker: Slack answered (even with an error). It
// reports whether it was open.
func (p *slackPause) answered() bool {
	p.mu.Lock()
	was := !p.until.IsZero()
	p.until, p.current = time.Time{}, 0
	p.b.Reset()
	p.mu.Unlock()
	if was {
		p.onOpen(false)
	}
	return was
}

// length is the pause now in force (0: none).
func (p *slackPause) length() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}
