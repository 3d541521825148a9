package bolt

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Approve implements keystore.ApprovalStore.
func (s *Store) Approve(_ context.Context, req keystore.ApprovalRequest) (keystore.Result, error) {
	return s.decideApproval(req, false)
}

// Reject implements keystore.ApprovalStore.
func (s *Store) Reject(_ context.Context, req keystore.ApprovalRequest) (keystore.Result, error) {
	return s.decideApproval(req, true)
}

func (s *Store) decideApproval(req keystore.ApprovalRequest, reject bool) (keystore.Result, error) {
	req, err := req.Normalize(reject)
	if err != nil {
		return keystore.Result{}, err
	}
	np := s.policies.Namespace(req.Namespace)
	return s.writeKey(req.Namespace, req.Key, func(cur *keystore.Record, _ *keystore.Breaker, now time.Time) (keystore.Step, error) {
		if reject {
			return keystore.DecideReject(cur, req, np, now)
		}
		return keystore.DecideApprove(cur, req, np, now)
	})
}

var _ keystore.ApprovalStore = (*Store)(nil)
