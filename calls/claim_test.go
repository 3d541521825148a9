package calls_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
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
