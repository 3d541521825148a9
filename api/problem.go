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

// problems is the one place an error code becomes an HTTP status and a
// title.
var problems = map[keystore.Code]struct {
	status int
	title  string
}{
	keystore.EInvalidRequest:      {http.StatusBadRequest, "Invalid request"},
	keystore.EInvalidKey:          {http.StatusBadRequest, "Invalid key"},
	keystore.EUnauthorized:        {http.StatusUnauthorized, "Unauthorized"},
	keystore.EForbidden:           {http.StatusForbidden, "Forbidden"},
	keystore.ERequestTimeout:      {http.StatusRequestTimeout, "Request timeout"},
	keystore.EOverloaded:          {http.StatusServiceUnavailable, "Overloaded"},
	keystore.ERateLimited:         {http.StatusTooManyRequests, "Too many requests from this client"},
	keystore.ENotFound:            {http.StatusNotFound, "Not found"},
	keystore.EStaleToken:          {http.StatusConflict, "Stale token"},
	keystore.EConflict:            {http.StatusConflict, "Conflict"},
	keystore.EPayloadTooLarge:     {http.StatusRequestEntityTooLarge, "Payload too large"},
	keystore.EKeyReused:           {http.StatusUnprocessableEntity, "Key reused with a different payload"},
	keystore.EStoreUnavailable:    {http.StatusServiceUnavailable, "Store unavailable"},
	keystore.EUnsupported:         {http.StatusNotImplemented, "Not supported by this store"},
	keystore.EStoreOutcomeUnknown: {http.StatusServiceUnavailable, "Store outcome unknown"},
}

func statusOf(code keystore.Code) int {
	if p, ok := problems[code]; ok {
		return p.status
	}
	return http.StatusInternalServerError
}

func titleOf(code keystore.Code) string {
	if p, ok := problems[code]; ok {
		return p.title
	}
	return "Internal server error"
}

// bodyTooLarge is the answer to a body over the limit, whether fasthttp
// or handle found it.
func bodyTooLarge() error {
	return keystore.Errorf(keystore.EPayloadTooLarge, "request body is larger than the configured limit")
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
		return bodyTooLarge()
	case fe.Code == fiber.StatusRequestTimeout:
		return keystore.Errorf(keystore.ERequestTimeout, "the request did not arrive within the read timeout; send it again")
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
