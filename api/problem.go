package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// ContentTypeProblem is the media type of every error answer (RFC 9457).
const ContentTypeProblem = "application/problem+json"

// ProblemTypeBase prefixes a problem's code to form its type URI: the
// anchor of the code in docs/api.md.
const ProblemTypeBase = "https://github.com/n8n-guard/n8n-guard/blob/main/docs/api.md#"

// Problem is the body of every error answer. It deliberately has no
// "error" member: n8n retries any item that carries one.
type Problem struct {
	Type   string                `json:"type"`
	Title  string                `json:"title"`
	Status int                   `json:"status"`
	Detail string                `json:"detail"`
	Code   keystore.Code         `json:"code"`
	Fields []keystore.FieldError `json:"fields,omitempty"`
}

// statusOf is the one place an error code becomes an HTTP status.
func statusOf(code keystore.Code) int {
	switch code {
	case keystore.EInvalidRequest, keystore.EInvalidKey:
		return http.StatusBadRequest
	case keystore.EUnauthorized:
		return http.StatusUnauthorized
	case keystore.ENotFound:
		return http.StatusNotFound
	case keystore.EStaleToken, keystore.EConflict:
		return http.StatusConflict
	case keystore.EPayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case keystore.EKeyReused:
		return http.StatusUnprocessableEntity
	case keystore.EStoreUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func titleOf(code keystore.Code) string {
	switch code {
	case keystore.EInvalidRequest:
		return "Invalid request"
	case keystore.EInvalidKey:
		return "Invalid key"
	case keystore.EUnauthorized:
		return "Unauthorized"
	case keystore.ENotFound:
		return "Not found"
	case keystore.EKeyReused:
		return "Key reused with a different payload"
	case keystore.EStaleToken:
		return "Stale token"
	case keystore.EConflict:
		return "Conflict"
	case keystore.EPayloadTooLarge:
		return "Payload too large"
	case keystore.EStoreUnavailable:
		return "Store unavailable"
	}
	return "Internal server error"
}

// fiberError translates the errors fiber and fasthttp raise themselves
// (unknown route, oversized body, unreadable request) into domain errors,
// so that they too go through statusOf.
func fiberError(err error) error {
	var fe *fiber.Error
	if !errors.As(err, &fe) {
		return err
	}
	switch {
	case fe.Code == fiber.StatusRequestEntityTooLarge:
		return keystore.Errorf(keystore.EPayloadTooLarge, "request body is larger than the configured limit")
	case fe.Code == fiber.StatusNotFound || fe.Code == fiber.StatusMethodNotAllowed:
		return keystore.Errorf(keystore.ENotFound, "no such route (or not with this method; the Allow header names the right one); see docs/api.md")
	case fe.Code < 500:
		return keystore.Errorf(keystore.EInvalidRequest, "the request could not be read (HTTP %d)", fe.Code)
	}
	return err
}

// writeError answers err as a problem. Internal errors are logged here and
// answered with a generic detail.
func (s *Server) writeError(c *fiber.Ctx, err error) error {
	err = fiberError(err)
	code := keystore.ErrorCode(err)
	status := statusOf(code)
	p := Problem{
		Type:   ProblemTypeBase + string(code),
		Title:  titleOf(code),
		Status: status,
		Detail: keystore.ErrorMessage(err),
		Code:   code,
	}
	var de *keystore.Error
	if errors.As(err, &de) {
		p.Fields = de.Fields
	}
	if status >= 500 {
		s.log.LogAttrs(c.UserContext(), slog.LevelError, "request failed",
			slog.String("method", c.Method()), slog.String("path", c.Path()),
			slog.Int("status", status), slog.String("code", string(code)), slog.Any("err", err))
	}
	if code == keystore.EUnauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="n8n-guard"`)
	}
	body, merr := json.Marshal(p)
	if merr != nil {
		return merr
	}
	c.Status(status)
	c.Set(fiber.HeaderContentType, ContentTypeProblem)
	return c.Send(body)
}
