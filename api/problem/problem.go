// Package problem is the HTTP side of the error vocabulary: the codes only
// HTTP raises, the one table from every code to its status and title, and
// the problem+json body (RFC 9457) both api and api/console answer with.
//
// The domain's codes are errs'; a domain package never imports this one.
package problem

import (
	"errors"
	"net/http"

	"github.com/n8n-guard/n8n-guard/errs"
)

// The codes of the transport: raised before or around a handler, never by
// a domain package.
const (
	Unauthorized    errs.Code = errs.Unauthorized   // no valid bearer token (or Slack signature): errs' code, listed here for its status
	RequestTimeout  errs.Code = "request_timeout"   // the request did not arrive within the read timeout
	Overloaded      errs.Code = "overloaded"        // the connection cap is reached
	PayloadTooLarge errs.Code = "payload_too_large" // the body is over the limit
	// RouteNotFound: no route has this method and path. Never not_found,
	// which says a key does not exist: a client that follows a wrong path
	// must not conclude the key is absent and write again.
	RouteNotFound errs.Code = "route_not_found"
	// RateLimited: one client address sent more than its share of
	// connections or requests without a valid token (the fair edge).
	RateLimited errs.Code = "rate_limited"
)

// TransportCodes lists the codes above.
var TransportCodes = []errs.Code{Unauthorized, RequestTimeout, Overloaded, PayloadTooLarge, RouteNotFound, RateLimited}

// Codes is every code an answer may carry: the domain's and the
// transport's.
func Codes() []errs.Code { return append(append([]errs.Code(nil), errs.Codes...), TransportCodes...) }

// ContentType is the media type of every error answer.
const ContentType = "application/problem+json"

// TypeBase prefixes a problem's code to form its type URI: the anchor of
// the code in docs/api.md.
const TypeBase = "https://github.com/n8n-guard/n8n-guard/blob/main/docs/api.md#"

// Problem is the body of every error answer. It deliberately has no
// "error" member: n8n retries any item that carries one.
type Problem struct {
	Type   string            `json:"type"`
	Title  string            `json:"title"`
	Status int               `json:"status"`
	Detail string            `json:"detail"`
	Code   errs.Code         `json:"code"`
	Fields []errs.FieldError `json:"fields,omitempty"`
}

// table is the one place an error code becomes an HTTP status and a title.
// A code missing here answers 500 (the status test fails for it).
var table = map[errs.Code]struct {
	status int
	title  string
}{
	errs.InvalidRequest:      {http.StatusBadRequest, "Invalid request"},
	errs.InvalidKey:          {http.StatusBadRequest, "Invalid key"},
	Unauthorized:             {http.StatusUnauthorized, "Unauthorized"},
	errs.Forbidden:           {http.StatusForbidden, "Forbidden"},
	RequestTimeout:           {http.StatusRequestTimeout, "Request timeout"},
	Overloaded:               {http.StatusServiceUnavailable, "Overloaded"},
	RateLimited:              {http.StatusTooManyRequests, "Too many requests from this client"},
	errs.NotFound:            {http.StatusNotFound, "Not found"},
	RouteNotFound:            {http.StatusNotFound, "No such route"},
	errs.StaleToken:          {http.StatusConflict, "Stale token"},
	errs.Conflict:            {http.StatusConflict, "Conflict"},
	errs.ApprovalRequired:    {http.StatusConflict, "Approval required"},
	errs.RerunNotGranted:     {http.StatusConflict, "Re-run not granted"},
	errs.ParkedWaiting:       {http.StatusConflict, "Parked execution still waiting"},
	PayloadTooLarge:          {http.StatusRequestEntityTooLarge, "Payload too large"},
	errs.KeyReused:           {http.StatusUnprocessableEntity, "Key reused with a different payload"},
	errs.StoreUnavailable:    {http.StatusServiceUnavailable, "Store unavailable"},
	errs.Unsupported:         {http.StatusNotImplemented, "Not supported by this store"},
	errs.StoreOutcomeUnknown: {http.StatusServiceUnavailable, "Store outcome unknown"},
	errs.RecordDamaged:       {http.StatusInternalServerError, "Record damaged"},
	errs.Internal:            {http.StatusInternalServerError, "Internal server error"},
}

// Status is the HTTP status of code; 500 for a code the table lacks.
func Status(code errs.Code) int {
	if p, ok := table[code]; ok {
		return p.status
	}
	return http.StatusInternalServerError
}

// Title is the short human name of code.
func Title(code errs.Code) string {
	if p, ok := table[code]; ok {
		return p.title
	}
	return "Internal server error"
}

// Of is the problem that answers err: internal errors get a generic
// detail, so no detail of the server leaks.
func Of(err error) Problem {
	code := errs.CodeOf(err)
	p := Problem{
		Type:   TypeBase + string(code),
		Title:  Title(code),
		Status: Status(code),
		Detail: errs.MessageOf(err),
		Code:   code,
	}
	var e *errs.Error
	if errors.As(err, &e) {
		p.Fields = e.Fields
	}
	return p
}
