package api

import (
	"net/url"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// route is one line of the contract: method, path (fiber's syntax), the
// scope it needs (access.Open: no token) and its handler. Everything else
// about a route's security follows from that line: handle checks the
// token and scope, needsToken (and so the small body limit of a request
// without a valid token) reads the open routes from it, and a handler
// built by onKey checks the request's namespace before anything else.
type route struct {
	method, path string
	scope        access.Scope
	// whole: the route spans every namespace at once (the whole-store
	// backup): only a token without namespace limits may call it.
	whole  bool
	handle fiber.Handler
}

// table is every route the server answers (the console's under /ui are
// its own: api/console).
func (s *Server) table(metrics fiber.Handler) []route {
	const get, post = fiber.MethodGet, fiber.MethodPost
	return []route{
		{method: get, path: "/healthz", scope: access.Open, handle: s.healthz},
		{method: get, path: "/readyz", scope: access.Open, handle: s.readyz},
		{method: get, path: "/metrics", scope: access.Open, handle: metrics},
		{method: post, path: "/v1/reserve", scope: access.ScopeWrite, handle: onKey(s, fromBody[reserveRequest], s.reserve)},
		{method: post, path: "/v1/complete", scope: access.ScopeWrite, handle: onKey(s, fromBody[completeRequest], s.complete)},
		{method: post, path: "/v1/fail", scope: access.ScopeWrite, handle: onKey(s, fromBody[failRequest], s.fail)},
		{method: post, path: "/v1/resolve", scope: access.ScopeDecide, handle: onKey(s, fromBody[resolveRequest], s.resolve)},
		{method: post, path: "/v1/approve", scope: access.ScopeDecide, handle: onKey(s, fromBody[approvalRequest], s.approve)}, // approval.go
		{method: post, path: "/v1/reject", scope: access.ScopeDecide, handle: onKey(s, fromBody[approvalRequest], s.reject)},
		{method: get, path: "/v1/keys/:namespace/:key", scope: access.ScopeLookup, handle: onKey(s, lookupFromPath, s.lookup)},
		{method: get, path: "/v1/lookup", scope: access.ScopeLookup, handle: onKey(s, lookupFromQuery, s.lookup)},
		{method: get, path: "/v1/keys", scope: access.ScopeList, handle: onKey(s, listFromQuery, s.listKeys)},
		{method: post, path: "/v1/keys/resolve-bulk", scope: access.BulkScope, handle: onKey(s, fromBody[bulkRequest], s.resolveBulk)}, // bulk.go
		{method: get, path: "/v1/destinations", scope: access.ScopeList, handle: s.destinations},
		{method: post, path: "/v1/destinations/hold", scope: access.ScopeAdmin, whole: true, handle: s.holdDestination}, // maintenance.go
		{method: post, path: "/v1/destinations/hold/end", scope: access.ScopeAdmin, whole: true, handle: s.endHold},
		{method: post, path: "/v1/destinations/reset", scope: access.ScopeAdmin, whole: true, handle: s.resetBreaker},
		{method: post, path: "/v1/n8n/error", scope: access.ScopeWrite, handle: s.n8nError},
		{method: get, path: "/v1/notifications", scope: access.ScopeList, whole: true, handle: s.notifications},
		{method: post, path: "/v1/notifications/resend", scope: access.ScopeAdmin, whole: true, handle: s.resendNotification},
		{method: post, path: "/slack/interactions", scope: access.Open, handle: s.slackInteraction}, // Slack's signature, not a token
		{method: get, path: BackupPath, scope: access.ScopeAdmin, whole: true, handle: s.backup},
	}
}

// RouteScope is the scope a route needs (method and fiber path), as the
// route table says; a route not in it needs access.ScopeAdmin.
func (s *Server) RouteScope(method, path string) access.Scope {
	for _, r := range s.routes {
		if r.method == method && r.path == path {
			return r.scope
		}
	}
	return access.ScopeAdmin
}

// namespaced is a request about one namespace's keys.
type namespaced interface{ namespace() string }

// onKey builds the handler of a route on one namespace's keys: read takes
// the request from the body, query or path; its namespace is checked
// against the principal before the store is asked (so the answer is the
// same whether or not the key exists); then do runs.
func onKey[R namespaced](s *Server, read func(*fiber.Ctx) (R, error), do func(*fiber.Ctx, R) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		req, err := read(c)
		if err != nil {
			return err
		}
		if err := s.allowNamespace(c, req.namespace()); err != nil {
			return err
		}
		return do(c, req)
	}
}

// fromBody reads a JSON object body into R.
func fromBody[R any](c *fiber.Ctx) (R, error) {
	var req R
	return req, decodeJSON(c.Body(), &req)
}

func lookupFromQuery(c *fiber.Ctx) (lookupQuery, error) {
	return lookupQuery{Namespace: query(c, "namespace"), Key: query(c, "key")}, nil
}

// lookupFromPath reads /v1/keys/{namespace}/{key}. fiber matches the path
// as sent, so a key holding "/" arrives as %2F in its segment.
func lookupFromPath(c *fiber.Ctx) (lookupQuery, error) {
	var q lookupQuery
	for _, p := range []struct {
		name string
		to   *string
	}{{"namespace", &q.Namespace}, {"key", &q.Key}} {
		v, err := url.PathUnescape(c.Params(p.name))
		if err != nil {
			return q, errs.InvalidField(p.name, "url_encoded", p.name+" is not URL-encoded correctly")
		}
		*p.to = v
	}
	return q, nil
}

func listFromQuery(c *fiber.Ctx) (listQuery, error) {
	q := listQuery{Namespace: query(c, "namespace"), State: keystore.State(query(c, "state")), Cursor: query(c, "cursor")}
	var err error
	q.Limit, err = queryInt(c, "limit")
	return q, err
}
