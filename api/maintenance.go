package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// holdRequest sets a maintenance window (keystore.DecideHoldDestination).
type holdRequest struct {
	Destination string    `json:"destination" validate:"namespace"`
	By          string    `json:"by" validate:"required,max=128"`
	Reason      string    `json:"reason" validate:"required,max=2000"`
	Until       time.Time `json:"until" validate:"required"`
}

// holdDestination pauses a destination for a maintenance window: events
// with resume_url park during it and catch up after it (admin scope).
func (s *Server) holdDestination(c *fiber.Ctx) error {
	var req holdRequest
	if err := s.decode(c, &req); err != nil {
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
