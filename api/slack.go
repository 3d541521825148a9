package api

import (
	"bytes"
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/notify"
)

// Interactions takes Slack's interactivity requests (button clicks) and
// re-sends dead notifications, passed as Config.Interactions: Interaction
// is slack.Interactions, which checks the request and hands its clicks to
// notify/decision's Decider; Resend is notify.Service's.
type Interactions interface {
	// Interaction checks Slack's signature (not a bearer token: Slack
	// cannot send one) and hands the clicks on; it returns at once.
	Interaction(ctx context.Context, header http.Header, body []byte) error
	Resend(ctx context.Context, id string) (notify.Notification, error)
}

func (s *Server) interactions() (Interactions, error) {
	if s.slack == nil {
		return nil, errs.Errorf(errs.StoreUnavailable, "notifications are not configured")
	}
	return s.slack, nil
}

// slackInteraction is POST /slack/interactions, the Request URL of the
// Slack app's interactivity. 200 with an empty body: Slack shows nothing,
// the message itself is updated.
func (s *Server) slackInteraction(c *fiber.Ctx) error {
	si, err := s.interactions()
	if err != nil {
		return err
	}
	header := http.Header{}
	c.Request().Header.VisitAll(func(k, v []byte) { header.Add(string(k), string(v)) })
	if err := si.Interaction(c.UserContext(), header, bytes.Clone(c.Body())); err != nil {
		return err
	}
	return c.SendStatus(http.StatusOK)
}

type resendRequest struct {
	ID string `json:"id" validate:"required,max=64"`
}

// resendNotification is POST /v1/notifications/resend {"id": …}: a dead
// notification is queued again once its cause (channel, token) is fixed.
func (s *Server) resendNotification(c *fiber.Ctx) error {
	si, err := s.interactions()
	if err != nil {
		return err
	}
	var req resendRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	n, err := si.Resend(c.UserContext(), req.ID)
	if err != nil {
		return err
	}
	return writeJSON(c, n)
}
