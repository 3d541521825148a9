package api

import (
	"bytes"
	"cmp"
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/notify"
)

// Notifications is the part of notify.Service the API serves.
type Notifications interface {
	// Intake stores a failed execution (n8n's Error Trigger item, as is)
	// durably in the outbox.
	Intake(ctx context.Context, body []byte) (notify.Accepted, error)
	List(ctx context.Context, q notify.ListQuery) (notify.Page, error)
}

type notificationsQuery struct {
	Status notify.Status `query:"status" validate:"omitempty,oneof=pending delivered dead"`
	Limit  int           `query:"limit" validate:"min=0,max=500"`
	Cursor string        `query:"cursor" validate:"max=1024"`
}

type acceptedAnswer struct {
	OK bool `json:"accepted"`
	notify.Accepted
}

func (s *Server) n8nError(c *fiber.Ctx) error {
	if s.notes == nil {
		return errs.Errorf(errs.StoreUnavailable, "notifications are not configured")
	}
	if err := s.intake.admit(c); err != nil {
		return err
	}
	// The body is passed on as is; notify parses it (every field inside may
	// be missing) and may keep it past this request, so it is copied.
	acc, err := s.notes.Intake(c.UserContext(), bytes.Clone(c.Body()))
	if err != nil {
		return err
	}
	c.Status(http.StatusAccepted)
	return writeJSON(c, acceptedAnswer{OK: true, Accepted: acc})
}

func (s *Server) notifications(c *fiber.Ctx) error {
	if s.notes == nil {
		return errs.Errorf(errs.StoreUnavailable, "notifications are not configured")
	}
	// state= is the same filter under the name /v1/keys uses.
	status, state := query(c, "status"), query(c, "state")
	if status != "" && state != "" && status != state {
		return &errs.Error{Code: errs.InvalidRequest, Message: "status and state name the same filter: give one",
			Fields: []errs.FieldError{{Field: "state", Rule: "eqfield=status"}}}
	}
	q := notificationsQuery{Status: notify.Status(cmp.Or(status, state)), Cursor: query(c, "cursor")}
	var err error
	if q.Limit, err = queryInt(c, "limit"); err != nil {
		return err
	}
	if err := s.check(&q); err != nil {
		return err
	}
	page, err := s.notes.List(c.UserContext(), notify.ListQuery{Status: q.Status, Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		return err
	}
	if page.Items == nil {
		page.Items = []notify.Notification{}
	}
	return writeJSON(c, page)
}
