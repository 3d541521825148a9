package bolt

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The catch-up pace of each destination. A bbolt file has one guard (the
// file lock), so the pace lives in its memory: after a restart the slots
// of the earlier process's resumed executions are free at once (those
// executions reserve their keys, which the breaker and the keys'
// leases still govern).

// TakeResumeTurn implements keystore.ParkStore.
func (s *Store) TakeResumeTurn(_ context.Context, dest string, hold time.Duration) (keystore.Turn, bool, time.Duration, error) {
	if err := keystore.CheckNamespace("destination", dest); err != nil {
		return keystore.Turn{}, false, 0, err
	}
	s.paceMu.Lock()
	defer s.paceMu.Unlock()
	if s.paces == nil {
		s.paces = map[string]keystore.Pace{}
	}
	next, t, ok, wait := keystore.DecideResumeTurn(s.paces[dest], dest, s.policies.Destination(dest), hold, s.now())
	if ok {
		s.paces[dest] = next
	}
	return t, ok, wait, nil
}

// ReleaseResumeTurn implements keystore.ParkStore.
func (s *Store) ReleaseResumeTurn(_ context.Context, t keystore.Turn) error {
	s.paceMu.Lock()
	defer s.paceMu.Unlock()
	if p, ok := s.paces[t.Destination]; ok {
		s.paces[t.Destination], _ = keystore.ReleaseTurn(p, t)
	}
	return nil
}
