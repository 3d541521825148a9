package postgres

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Approve implements keystore.ApprovalStore.
func (s *Store) Approve(ctx context.Context, req keystore.ApprovalRequest) (keystore.Result, error) {
	return s.decideApproval(ctx, req, false)
}

// Reject implements keystore.ApprovalStore.
func (s *Store) Reject(ctx context.Context, req keystore.ApprovalRequest) (keystore.Result, error) {
	return s.decideApproval(ctx, req, true)
}

func (s *Store) decideApproval(ctx context.Context, req keystore.ApprovalRequest, reject bool) (keystore.Result, error) {
	req, err := req.Normalize(reject)
	if err != nil {
		return keystore.Result{}, err
	}
	np := s.policies.Namespace(req.Namespace)
	op := "approve"
	if reject {
		op = "reject"
	}
	return s.run(ctx, decision{op: op, ns: req.Namespace, key: req.Key, fromKey: true, noBreaker: true,
		decide: func(cur *keystore.Record, _ *keystore.Breaker, now time.Time) (keystore.Step, error) {
			if reject {
				return keystore.DecideReject(cur, req, np, now)
			}
			return keystore.DecideApprove(cur, req, np, now)
		}})
}

var _ keystore.ApprovalStore = (*Store)(nil)
