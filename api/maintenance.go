package api

import (
	"time"

	"github.com/gofiber/fiber/v2"
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
	ps := s.store
	d, err := s.whoDecides(c, req.By)
	if err != nil {
		return err
	}
	b, err := ps.HoldDestination(c.UserContext(), req.Destination, d.By, req.Reason, req.Until)
	if err != nil {
		return err
	}
	s.log.Info("maintenance window set: the destination is paused; events with resume_url park and catch up after it",
		"destination", req.Destination, "by", d.By, "until", req.Until.UTC().Format(time.RFC3339), "reason", req.Reason)
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
	ps := s.store
	d, err := s.whoDecides(c, req.By)
	if err != nil {
		return err
	}
	b, err := ps.EndHold(c.UserContext(), req.Destination, d.By, req.Reason)
	if err != nil {
		return err
	}
	s.log.Info("maintenance window ended early: the destination is probed with one parked event, the rest follow",
		"destination", req.Destination, "by", d.By, "reason", req.Reason)
	return writeJSON(c, b)
}

// resetRequest closes a destination's breaker by hand: the wire's shape
// only (keystore.DecideResetBreaker has the rules: reason required).
type resetRequest struct {
	Destination string `json:"destination"`
	By          string `json:"by"`
	Reason      string `json:"reason"`
}

// resetBreaker closes a destination's breaker now, for a reason: the next
// reserve naming it goes through although no probe showed the destination
// back. Admin scope and no namespace limits, as a maintenance window: the
// breaker is every namespace's that names the destination.
func (s *Server) resetBreaker(c *fiber.Ctx) error {
	var req resetRequest
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	d, err := s.whoDecides(c, req.By)
	if err != nil {
		return err
	}
	b, err := s.store.ResetBreaker(c.UserContext(), req.Destination, d.By, req.Reason)
	if err != nil {
		return err
	}
	s.log.Info("breaker reset by a person: writes are let through again, no probe has shown the destination back",
		"destination", req.Destination, "by", d.By, "reason", req.Reason)
	return writeJSON(c, b)
}
