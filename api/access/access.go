// Package access says who sent a request and what they may do: the one
// Principal of the API and the console, the roles a token may have and the
// scopes each role grants. It decides nothing about keys; api checks a
// route's scope and namespace with it, the console what a session shows.
package access

import (
	"context"
	"slices"
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
	// RoleDecide: what read may, and a person's decisions on keys
	// (resolve, approve, reject, bulk decisions); not breaker resets,
	// re-sends or backups.
	RoleDecide Role = "decide"
	// RoleAdmin: everything, including resolve, breaker reset, backup and
	// notification re-send. Tokens without a scope are admins.
	RoleAdmin Role = "admin"
)

// Roles lists the roles a configuration may name.
var Roles = []Role{RoleReserve, RoleRead, RoleDecide, RoleAdmin}

// Scope is what one route needs; a role grants a set of scopes.
type Scope string

const (
	// Open: no token at all (health, metrics, routes signed by their
	// sender such as Slack's).
	Open        Scope = ""
	ScopeWrite  Scope = "write"  // reserve, complete, fail, n8n/error
	ScopeLookup Scope = "lookup" // one key
	ScopeList   Scope = "list"   // many keys, destinations, notifications
	ScopeDecide Scope = "decide" // a person's decision on a key (resolve), or on many (BulkScope)
	ScopeAdmin  Scope = "admin"  // operations: breakers, re-sends, backups
)

// BulkScope is what a bulk decision needs — POST /v1/keys/resolve-bulk and
// the console's bulk page alike: decide, the scope of the one decision it
// makes about each key. A bulk decision is that resolve, key by key,
// through the same state machine; what keeps it from taking too much is
// not a higher role but the domain's rules (a written-out selection, an id
// that names one decision: keystore.BulkResolveRequest), the namespace
// limits, and the count a person confirms. admin stays for operating the
// guard itself (breakers, windows, re-sends, backups).
const BulkScope = ScopeDecide

var grants = map[Role][]Scope{
	RoleReserve: {ScopeWrite, ScopeLookup},
	RoleRead:    {ScopeLookup, ScopeList},
	RoleDecide:  {ScopeLookup, ScopeList, ScopeDecide},
	RoleAdmin:   {ScopeWrite, ScopeLookup, ScopeList, ScopeDecide, ScopeAdmin},
}

// ValidRole tells whether r is one of Roles.
func ValidRole(r Role) bool { _, ok := grants[r]; return ok }

// Principal is who sent a request: the token's name (never its value),
// or the person a sign-in named, with the role and the namespaces it may
// use.
type Principal struct {
	Name string
	Role Role
	// Namespaces the token may use; empty means every namespace.
	Namespaces []string
	// Person: Name is a person an identity provider vouched for (OpenID
	// Connect), not a token shared by whoever holds it.
	Person bool
	// PersonName is the person a named token belongs to (the config's
	// tokens.<name>.person): Name stays the token's, and its decisions
	// record this person. "" for a shared token.
	PersonName string `json:",omitempty"`
	// Subject is the identity provider's id of a signed-in person (the
	// ID token's sub): one of the identities four eyes compares.
	Subject string `json:",omitempty"`
}

// Identities are the names four eyes compares with whoever requested an
// approval (keystore.ApprovalRequest.Identities): the token's or the
// person's name, a named token's person, a signed-in person's subject.
func (p Principal) Identities() []string {
	var out []string
	for _, id := range []string{p.Name, p.PersonName, p.Subject} {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// Allows tells whether the principal's role grants scope.
func (p Principal) Allows(scope Scope) bool { return slices.Contains(grants[p.Role], scope) }

// MayUse tells whether the principal may act on namespace ns.
func (p Principal) MayUse(ns string) bool {
	return len(p.Namespaces) == 0 || slices.Contains(p.Namespaces, ns)
}

// MayUseBreaker tells whether the principal may see (and, acting, reset)
// the breaker of destination dest. A breaker is shared by every namespace
// whose keys name its destination, and the guard keeps no list of which
// do: a token limited to namespaces sees the breakers of destinations
// named as one of its namespaces (what a reserve without a destination of
// its own is usually given), no other team's.
func (p Principal) MayUseBreaker(dest string) bool { return p.MayUse(dest) }

// Unlimited tells whether the principal may use every namespace, as what
// spans them all (a backup of the whole store) needs.
func (p Principal) Unlimited() bool { return len(p.Namespaces) == 0 }

// CanAct tells whether the principal may decide on keys (resolve); a read
// role sees but cannot act.
func (p Principal) CanAct() bool { return p.Allows(ScopeDecide) }

// CanOperate tells whether the principal may reset breakers and re-send
// notifications (the admin scope).
func (p Principal) CanOperate() bool { return p.Allows(ScopeAdmin) }

// Who is the person behind the principal: the person signed in, or a
// named token's person; "" for a shared token, which names nobody.
func (p Principal) Who() string {
	if p.Person {
		return p.Name
	}
	return p.PersonName
}

// Identity is what a store binds to an attempt the principal started (a
// request_id repeat hands the token back only to the same identity).
func (p Principal) Identity() string {
	if p.Person {
		return "person:" + p.Name
	}
	return "token:" + p.Name
}

type principalKey struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// From returns the principal of an authenticated request's context
// (c.UserContext() in a handler); false on open routes.
func From(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
