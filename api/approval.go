package api

import (
	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Approval before writing (keystore/approval.go): a person approves or
// rejects a key that awaits approval. The scope is resolve's: deciding
// about a key is an admin's.

type approvalRequest struct {
	Namespace string    `json:"namespace"`
	Key       keyString `json:"key"`
	By        string    `json:"by"`
	Note      string    `json:"note"`
}

func (r approvalRequest) namespace() string { return r.Namespace }

func (r approvalRequest) domain() keystore.ApprovalRequest {
	return keystore.ApprovalRequest{Namespace: r.Namespace, Key: string(r.Key), By: r.By, Note: r.Note}
}

func (s *Server) approve(c *fiber.Ctx, req approvalRequest) error {
	return s.decideApproval(c, req, false)
}

func (s *Server) reject(c *fiber.Ctx, req approvalRequest) error {
	return s.decideApproval(c, req, true)
}

func (s *Server) decideApproval(c *fiber.Ctx, req approvalRequest, reject bool) error {
	decide := s.store.Approve
	if reject {
		decide = s.store.Reject
	}
	d, err := s.whoDecides(c, req.By)
	if err != nil {
		return err
	}
	dr := req.domain()
	dr.By, dr.Identities, dr.Claimed = d.By, d.Identities, d.Claimed
	res, err := decide(c.UserContext(), dr)
	if err != nil {
		return err
	}
	if !res.Replayed {
		s.metrics.approvals.WithLabelValues(string(res.Outcome)).Inc()
	}
	return s.writeResult(c, res, nil)
}

func newApprovalsCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "n8n_guard_approvals_total",
		Help: "Approval decisions written through the API and the console, by decision (approved, rejected); a repeated decision is not counted.",
	}, []string{"decision"})
}
