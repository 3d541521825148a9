package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// holdRequest sets a maintenance window: the wire's shape only; its rules
// are the domain's (the store checks the destination,
// keystore.DecideHoldDestination by, reason and until).
type holdRequest struct {
	Destination string    `json:"destination"`
	By          string    `json:"by"`
	Reason      string    `json:"reason"`
	Until       time.Time `json:"until"`
}

// holdDestination pauses a destination for a maintenance window: events
// with resume_url park during it and catch up after it (admin scope).
func (s *Server) holdDestination(c *fiber.Ctx) error {
	var req holdRequest
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	ps, ok := s.store.(keystore.ParkStore)
	if !ok {
		return errs.Errorf(errs.Unsupported, "this server's store does not keep maintenance windows")
	}
	b, err := ps.HoldDestination(c.UserContext(), req.Destination, req.By, req.Reason, req.Until)
	if err != nil {
		return err
	}
	s.log.Info("maintenance window set: the destination is paused; events with resume_url park and catch up after it",
		"destination", req.Destination, "by", req.By, "until", req.Until.UTC().Format(time.RFC3339), "reason", req.Reason)
	return writeJSON(c, b)
}

// endHoldRequest ends a maintenance window early: the wire's shape only
// (keystore.DecideEndHold has the rules).
type endHoldRequest struct {
	Destination string `json:"destination"`
	By          string `json:"by"`
	Reason      string `json:"reason"`
}

// endHold ends a destination's maintenance window now: the catch-up
// probes it with one parked execution, the rest follow (admin scope).
func (s *Server) endHold(c *fiber.Ctx) error {
	var req endHoldRequest
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	ps, ok := s.store.(keystore.ParkStore)
	if !ok {
		return errs.Errorf(errs.Unsupported, "this server's store does not keep maintenance windows")
	}
	b, err := ps.EndHold(c.UserContext(), req.Destination, req.By, req.Reason)
	if err != nil {
		return err
	}
	s.log.Info("maintenance window ended early: the destination is probed with one parked event, the rest follow",
		"destination", req.Destination, "by", req.By, "reason", req.Reason)
	return writeJSON(c, b)
}
