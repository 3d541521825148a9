package calls_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// store holds one claim, as keystore does: extended and released only
// by the holder that names its current until.
type store struct {
	mu       sync.Mutex
	until    time.Time
	released bool
}

func (s *store) claim() calls.Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return calls.Claim{Until: s.until, Length: 100 * time.Millisecond, Every: 5 * time.Millisecond, Clock: time.Now,
		Log: slog.New(slog.DiscardHandler), What: "a claim",
		Extend: func(_ context.Context, held time.Time) (time.Time, bool, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.released || !held.Equal(s.until) {
				return time.Time{}, false, nil
			}
			s.until = time.Now().Add(100 * time.Millisecond)
			return s.until, true, nil
		},
		Release: func(_ context.Context, held time.Time) (bool, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.released || !held.Equal(s.until) {
				return false, nil
			}
			s.released = true
			return true, nil
		}}
}

func (s *store) state() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until, s.released
}

// A claim kept past its first end is extended, and handed back by the
// until the store gave last; stopped, it stays as it is.
func TestAKeptClaimIsExtendedAndHandedBack(t *testing.T) {
	first := time.Now().Add(100 * time.Millisecond)
	s := &store{until: first}
	k := calls.Keep(context.Background(), s.claim())
	testwait.For(t, "the claim to be extended past its first end and more", func() bool {
		until, _ := s.state()
		return until.After(first.Add(100 * time.Millisecond))
	})
	k.HandBack(context.Background())
	if _, released := s.state(); !released {
		t.Fatal("the extended claim was not handed back")
	}

	s = &store{until: time.Now().Add(100 * time.Millisecond)}
	k = calls.Keep(context.Background(), s.claim())
	k.Stop()
	k.HandBack(context.Background()) // after Stop: still by the last until
	if _, released := s.state(); !released {
		t.Fatal("a stopped keeper did not hand its claim back")
	}
}

// A claim whose extensions keep failing (the store cannot be written) is
// said to lapse before its until, on the worker's clock, so its holder
// cuts its call before another guard may take the claim; one whose
// extensions succeed is never said to lapse.
func TestAClaimThatCannotBeExtendedSaysItLapsesBeforeItsUntil(t *testing.T) {
	const length = time.Minute
	for _, tc := range []struct {
		name   string
		extend func(now time.Time) (time.Time, bool, error)
		lapses bool
	}{
		{"the store refuses every extension", func(time.Time) (time.Time, bool, error) {
			return time.Time{}, false, errors.New("store read-only")
		}, true},
		{"the store extends it", func(now time.Time) (time.Time, bool, error) { return now.Add(length), true, nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New()
			until := clock.Now().Add(length)
			var extended atomic.Bool
			k := calls.Keep(context.Background(), calls.Claim{Until: until, Length: length, Every: time.Millisecond, Clock: clock.Now,
				Log: slog.New(slog.DiscardHandler), What: "a claim",
				Extend: func(context.Context, time.Time) (time.Time, bool, error) {
					until, ok, err := tc.extend(clock.Now())
					extended.Store(extended.Load() || ok)
					return until, ok, err
				},
				Release: func(context.Context, time.Time) (bool, error) { return true, nil }})
			defer k.Stop()
			call, cancel := k.Within(context.Background())
			defer cancel()
			lapsed := func() bool {
				select {
				case <-k.Lapses():
					return true
				default:
					return false
				}
			}
			clock.Advance(length/2 + time.Second) // extended from here, or tried
			if !tc.lapses {
				testwait.For(t, "the claim extended", extended.Load)
				clock.Advance(length / 2) // past the first until
				if testwait.Poll(50*time.Millisecond, func() bool { return call.Err() != nil }) {
					t.Fatal("a claim extended in time was said to lapse")
				}
				return
			}
			if testwait.Poll(50*time.Millisecond, lapsed) {
				t.Fatal("said to lapse with half a claim left, before a margin of it")
			}
			clock.Set(until.Add(-time.Second)) // inside the margin, before the until
			testwait.For(t, "the claim said to lapse before its until", lapsed)
			<-call.Done()
			if !errors.Is(context.Cause(call), calls.ErrLapsing) {
				t.Fatalf("the call's context ended with %v, want ErrLapsing", context.Cause(call))
			}
		})
	}
}
