package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Role is what a token may do. The roles are not nested by accident:
// a reserve token (a team's n8n) must not list other teams' keys, and a
// read token (a dashboard) must not write.
type Role string

const (
	// RoleReserve: reserve, complete, fail, lookup, and sending n8n's
	// failed executions (what a workflow does).
	RoleReserve Role = "reserve"
	// RoleRead: lookup, the key list, destinations, notifications.
	RoleRead Role = "read"
	// RoleAdmin: everything, including resolve, breaker reset, backup and
	// notification re-send. Tokens without a scope are admins.
	RoleAdmin Role = "admin"
)

// Roles lists the roles a configuration may name.
var Roles = []Role{RoleReserve, RoleRead, RoleAdmin}

// Scope is what one route needs; a role grants a set of scopes.
type Scope string

const (
	ScopeWrite  Scope = "write"  // reserve, complete, fail, n8n/error
	ScopeLookup Scope = "lookup" // one key
	ScopeList   Scope = "list"   // many keys, destinations, notifications
	ScopeAdmin  Scope = "admin"  // a person's decisions and operations
)

var grants = map[Role][]Scope{
	RoleReserve: {ScopeWrite, ScopeLookup},
	RoleRead:    {ScopeLookup, ScopeList},
	RoleAdmin:   {ScopeWrite, ScopeLookup, ScopeList, ScopeAdmin},
}

// routeScopes is the scope each /v1 route needs. A /v1 route missing here
// needs ScopeAdmin: a route added without thought fails closed.
var routeScopes = map[string]Scope{
	"POST /v1/reserve":      ScopeWrite,
	"POST /v1/complete":     ScopeWrite,
	"POST /v1/fail":         ScopeWrite,
	"POST /v1/n8n/error":    ScopeWrite,
	"GET /v1/lookup":        ScopeLookup,
	"GET /v1/keys":          ScopeList,
	"GET /v1/destinations":  ScopeList,
	"GET /v1/notifications": ScopeList,
	"POST /v1/resolve":      ScopeAdmin,
}

// RouteScope is the scope a /v1 route needs (method and fiber path).
func RouteScope(method, path string) Scope {
	if s, ok := routeScopes[method+" "+path]; ok {
		return s
	}
	return ScopeAdmin
}

// Principal is who sent a request: the token's name (never its value),
// its role and the namespaces it may use.
type Principal struct {
	Name string
	Role Role
	// Namespaces the token may use; empty means every namespace.
	Namespaces []string
}

// Allows tells whether the principal's role grants scope.
func (p Principal) Allows(scope Scope) bool { return slices.Contains(grants[p.Role], scope) }

// MayUse tells whether the principal may act on namespace ns.
func (p Principal) MayUse(ns string) bool {
	return len(p.Namespaces) == 0 || slices.Contains(p.Namespaces, ns)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of an authenticated request's
// context (c.UserContext() in a handler); false on open routes.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// TokenScope is one configured token: its name, the SHA-256 of its value,
// its role and namespaces.
type TokenScope struct {
	Name       string
	SHA256     [sha256.Size]byte
	Role       Role
	Namespaces []string
}

// tokenSet holds every accepted token by hash only.
type tokenSet []TokenScope

func newTokenSet(unscoped []string, scoped []TokenScope) (tokenSet, error) {
	var ts tokenSet
	for _, t := range unscoped {
		if t = strings.TrimSpace(t); t != "" {
			ts = append(ts, TokenScope{Name: fmt.Sprintf("token-%d", len(ts)+1), SHA256: sha256.Sum256([]byte(t)), Role: RoleAdmin})
		}
	}
	for _, t := range scoped {
		if t.Name == "" {
			return nil, fmt.Errorf("a scoped token has no name")
		}
		if _, ok := grants[t.Role]; !ok {
			return nil, fmt.Errorf("token %s: role %q is not one of %v", t.Name, t.Role, Roles)
		}
		for _, ns := range t.Namespaces {
			if !keystore.ValidNamespace(ns) {
				return nil, fmt.Errorf("token %s: %q is not a valid namespace", t.Name, ns)
			}
		}
		ts = append(ts, t)
	}
	for i := range ts {
		for j := range i {
			if ts[i].Name == ts[j].Name {
				return nil, fmt.Errorf("two tokens are named %s", ts[i].Name)
			}
			if ts[i].SHA256 == ts[j].SHA256 {
				return nil, fmt.Errorf("tokens %s and %s have the same value", ts[j].Name, ts[i].Name)
			}
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("no API token configured")
	}
	return ts, nil
}

// find returns the principal of an Authorization header value. Every
// token is compared, always, in constant time against hashes of equal
// length: the time taken says nothing about which token came close.
func (ts tokenSet) find(header string) (Principal, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range ts {
		eq := subtle.ConstantTimeCompare(sum[:], ts[i].SHA256[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Principal{}, false
	}
	t := ts[found]
	return Principal{Name: t.Name, Role: t.Role, Namespaces: t.Namespaces}, true
}

// authorize checks the bearer token and the route's scope, and puts the
// principal into the request's context.
func (s *Server) authorize(c *fiber.Ctx, method, path string) error {
	p, ok := s.tokens.find(c.Get(fiber.HeaderAuthorization))
	if !ok {
		if err := s.fair.unauthenticated(c); err != nil {
			return err
		}
		s.metrics.refused("", "unauthorized")
		return unauthorized(c.Get(fiber.HeaderAuthorization))
	}
	s.fair.authenticated(c)
	c.SetUserContext(WithPrincipal(c.UserContext(), p))
	if scope := RouteScope(method, path); !p.Allows(scope) {
		s.metrics.refused(p.Name, "scope")
		s.log.Warn("request refused: the token's role lacks the route's scope",
			"token", p.Name, "role", p.Role, "route", method+" "+path, "scope", scope)
		return &keystore.Error{Code: keystore.EForbidden,
			Message: fmt.Sprintf("token %s (role %s) lacks scope %s, which %s %s needs", p.Name, p.Role, scope, method, path),
			Fields:  []keystore.FieldError{{Field: "scope", Rule: string(scope)}}}
	}
	return nil
}

func unauthorized(header string) error {
	if header == "" {
		return keystore.Errorf(keystore.EUnauthorized, "send Authorization: Bearer <token>")
	}
	return keystore.Errorf(keystore.EUnauthorized, "the bearer token is not valid")
}

// allowNamespace refuses a request on a namespace the token may not use.
// It runs before the store is asked, so the answer is the same whether
// or not the key exists.
func (s *Server) allowNamespace(c *fiber.Ctx, ns string) error {
	p, ok := PrincipalFrom(c.UserContext())
	if !ok || p.MayUse(ns) {
		return nil
	}
	s.metrics.refused(p.Name, "namespace")
	s.log.Warn("request refused: namespace outside the token's scope", "token", p.Name, "namespace", ns)
	what := "namespace " + ns
	if ns == "" {
		what = "every namespace (name one)"
	}
	return &keystore.Error{Code: keystore.EForbidden,
		Message: fmt.Sprintf("token %s lacks scope for %s", p.Name, what),
		Fields:  []keystore.FieldError{{Field: "namespace", Rule: "scope"}}}
}

// tokenName names the sender in metrics and logs: the principal's name,
// or "none" on open routes and refused requests.
func tokenName(ctx context.Context) string {
	if p, ok := PrincipalFrom(ctx); ok {
		return p.Name
	}
	return "none"
}
