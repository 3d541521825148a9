package bolt

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Acknowledge implements keystore.AckStore.
func (s *Store) Acknowledge(_ context.Context, req keystore.AckRequest) (keystore.Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return keystore.Result{}, err
	}
	return s.writeKey(req.Namespace, req.Key, func(cur *keystore.Record, _ *keystore.Breaker, now time.Time) (keystore.Step, error) {
		return keystore.DecideAcknowledge(cur, req, now)
	})
}

var _ keystore.AckStore = (*Store)(nil)
