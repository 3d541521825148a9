package api

import (
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
)

// bodyTooLarge is the answer to a body over the limit, whether fasthttp
// or handle found it.
func bodyTooLarge() error {
	return errs.Errorf(problem.PayloadTooLarge, "request body is larger than the configured limit")
}

// fiberError translates the errors fiber and fasthttp raise themselves
// (unknown route, oversized body, unreadable request) into *errs.Error,
// so that they too go through problem's one table.
func fiberError(err error) error {
	var fe *fiber.Error
	if !errors.As(err, &fe) {
		return err
	}
	switch {
	case fe.Code == fiber.StatusRequestEntityTooLarge:
		return bodyTooLarge()
	case fe.Code == fiber.StatusRequestTimeout:
		return errs.Errorf(problem.RequestTimeout, "the request did not arrive within the read timeout; send it again")
	case fe.Code == fiber.StatusNotFound || fe.Code == fiber.StatusMethodNotAllowed:
		return errs.Errorf(problem.RouteNotFound, "no such route (or not with this method; the Allow header names the right one); see docs/api.md")
	case fe.Code < 500:
		return errs.Errorf(errs.InvalidRequest, "the request could not be read (HTTP %d)", fe.Code)
	}
	return err
}

// writeError answers err as a problem. Internal errors are logged here and
// answered with a generic detail.
func (s *Server) writeError(c *fiber.Ctx, err error) error {
	p := problem.Of(fiberError(err))
	if p.Status >= 500 {
		s.log.LogAttrs(c.UserContext(), slog.LevelError, "request failed",
			slog.String("method", c.Method()), slog.String("path", c.Path()),
			slog.Int("status", p.Status), slog.String("code", string(p.Code)), slog.Any("err", err))
	}
	if p.Code == problem.Unauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="n8n-guard"`)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	c.Status(p.Status)
	c.Set(fiber.HeaderContentType, problem.ContentType)
	return c.Send(body)
}
