package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// TokenScope is one configured token: its name, the SHA-256 of its value,
// its role and namespaces, and the person it belongs to ("" for a token
// shared by a team or an automation).
type TokenScope struct {
	Name       string
	SHA256     [sha256.Size]byte
	Role       access.Role
	Namespaces []string
	Person     string
}

// tokenSet holds every accepted token by hash only.
type tokenSet []TokenScope

func newTokenSet(unscoped []string, scoped []TokenScope) (tokenSet, error) {
	var ts tokenSet
	for _, t := range unscoped {
		if t = strings.TrimSpace(t); t != "" {
			ts = append(ts, TokenScope{Name: fmt.Sprintf("token-%d", len(ts)+1), SHA256: sha256.Sum256([]byte(t)), Role: access.RoleAdmin})
		}
	}
	for _, t := range scoped {
		if t.Name == "" {
			return nil, fmt.Errorf("a scoped token has no name")
		}
		if !access.ValidRole(t.Role) {
			return nil, fmt.Errorf("token %s: role %q is not one of %v", t.Name, t.Role, access.Roles)
		}
		for _, ns := range t.Namespaces {
			if !keystore.ValidNamespace(ns) {
				return nil, fmt.Errorf("token %s: %q is not a valid namespace", t.Name, ns)
			}
		}
		if err := CheckTokenPerson(t); err != nil {
			return nil, err
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
func (ts tokenSet) find(header string) (access.Principal, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return access.Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range ts {
		eq := subtle.ConstantTimeCompare(sum[:], ts[i].SHA256[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return access.Principal{}, false
	}
	t := ts[found]
	return access.Principal{Name: t.Name, Role: t.Role, Namespaces: t.Namespaces, PersonName: t.Person}, true
}

// CheckTokenPerson refuses a token person that is no name on one line, or
// too long to be recorded with the token's name (namedBy).
func CheckTokenPerson(t TokenScope) error {
	if t.Person == "" {
		return nil
	}
	if strings.TrimSpace(t.Person) != t.Person || strings.IndexFunc(t.Person, unicode.IsControl) >= 0 || !utf8.ValidString(t.Person) {
		return fmt.Errorf("token %s: person %q must be a name or e-mail on one line, without blanks around it", t.Name, t.Person)
	}
	if err := keystore.CheckPerson("person", t.Person); err != nil {
		return fmt.Errorf("token %s: %q: %s", t.Name, t.Person, errs.MessageOf(err))
	}
	if n := utf8.RuneCountInString(namedBy(t.Person, t.Name)); n > keystore.MaxByLength {
		return fmt.Errorf("token %s: person %q is too long: %q has %d characters, a history's by at most %d",
			t.Name, t.Person, namedBy(t.Person, t.Name), n, keystore.MaxByLength)
	}
	return nil
}

// Who decides: every decision through the API (resolve, approve, reject,
// a breaker reset, a maintenance window, a bulk resolve) records the
// person, as the console and Slack do. A named token's person is vouched
// for by the configuration; a shared token's sender names themself in the
// body's by, which the history marks as not verified.

// namedBy is how a named token's decision is recorded.
func namedBy(person, token string) string { return person + " (API token " + token + ")" }

// sharedBy is how a decision through a shared token is recorded: the
// body's by, marked as said by whoever holds the token.
func sharedBy(by, token string) string { return by + " (via shared token " + token + ")" }

// decider is who a decision records (By, for the history) and the names
// four eyes compares with the requester: Identities a token or sign-in
// vouches for, Claimed what the body said that nobody vouched for (a
// shared token's by), which can only add a refusal.
type decider struct {
	By         string
	Identities []string
	Claimed    []string
}

// whoDecides says who decides a request whose body said by. With a named
// token (or a person's sign-in) the person decides: by may be left out,
// and one naming someone else is refused (403 forbidden, field by, rule
// token_person; nothing changed). With a shared token by is required (the
// domain's rule refuses it left out) and recorded as "<by> (via shared
// token <name>)".
func (s *Server) whoDecides(c *fiber.Ctx, by string) (decider, error) {
	by = strings.TrimSpace(by)
	p, ok := access.From(c.UserContext())
	if !ok {
		return decider{By: by, Identities: []string{by}}, nil
	}
	if person := p.Who(); person != "" {
		if by != "" && keystore.CanonicalPerson(by) != keystore.CanonicalPerson(person) {
			s.metrics.refused(p.Name, "person")
			s.log.Warn("request refused: by names another person than the token's", "token", p.Name, "person", person, "by", by)
			return decider{}, &errs.Error{Code: errs.Forbidden,
				Message: fmt.Sprintf("token %s belongs to %s, and by %q names someone else: leave by out or send %s; nothing changed", p.Name, person, by, person),
				Fields:  []errs.FieldError{{Field: "by", Rule: "token_person"}}}
		}
		if p.Person {
			return decider{By: person + " (API, OIDC)", Identities: p.Identities()}, nil
		}
		return decider{By: namedBy(person, p.Name), Identities: []string{person}}, nil
	}
	if by == "" {
		// The domain refuses it, naming every other broken field too.
		return decider{}, nil
	}
	rec := sharedBy(by, p.Name)
	if n := utf8.RuneCountInString(rec); n > keystore.MaxByLength {
		return decider{}, errs.InvalidField("by", "max=128",
			fmt.Sprintf("by is too long: recorded as %q it has %d characters, at most %d", rec, n, keystore.MaxByLength))
	}
	// A shared token vouches for nobody: by is its holder's word.
	return decider{By: rec, Claimed: []string{by}}, nil
}

// authorize checks the bearer token and the route's scope, and puts the
// principal into the request's context.
func (s *Server) authorize(c *fiber.Ctx, r route) error {
	method, path := r.method, r.path
	p, ok := s.tokens.find(c.Get(fiber.HeaderAuthorization))
	if !ok {
		if err := s.fair.unauthenticated(c); err != nil {
			return err
		}
		s.metrics.refused("", "unauthorized")
		return unauthorized(c.Get(fiber.HeaderAuthorization))
	}
	s.fair.authenticated(c)
	c.SetUserContext(access.With(c.UserContext(), p))
	if scope := r.scope; !p.Allows(scope) {
		s.metrics.refused(p.Name, "scope")
		s.log.Warn("request refused: the token's role lacks the route's scope",
			"token", p.Name, "role", p.Role, "route", method+" "+path, "scope", scope)
		return &errs.Error{Code: errs.Forbidden,
			Message: fmt.Sprintf("token %s (role %s) lacks scope %s, which %s %s needs", p.Name, p.Role, scope, method, path),
			Fields:  []errs.FieldError{{Field: "scope", Rule: string(scope)}}}
	}
	if r.whole && !p.Unlimited() {
		s.metrics.refused(p.Name, "namespace")
		s.log.Warn("request refused: the route spans every namespace and the token is limited to some",
			"token", p.Name, "route", method+" "+path, "namespaces", p.Namespaces)
		return &errs.Error{Code: errs.Forbidden,
			Message: fmt.Sprintf("token %s is limited to namespaces %s; %s %s spans every namespace and needs a token without namespace limits",
				p.Name, strings.Join(p.Namespaces, ", "), method, path),
			Fields: []errs.FieldError{{Field: "namespace", Rule: "all"}}}
	}
	return nil
}

func unauthorized(header string) error {
	if header == "" {
		return errs.Errorf(problem.Unauthorized, "send Authorization: Bearer <token>")
	}
	return errs.Errorf(problem.Unauthorized, "the bearer token is not valid")
}

// allowNamespace refuses a request on a namespace the token may not use.
// It runs before the store is asked, so the answer is the same whether
// or not the key exists.
func (s *Server) allowNamespace(c *fiber.Ctx, ns string) error {
	p, ok := access.From(c.UserContext())
	// A name that is no namespace at all is the store's to refuse (400,
	// before it reads anything), as it was when the API validated first.
	if !ok || p.MayUse(ns) || (ns != "" && !keystore.ValidNamespace(ns)) {
		return nil
	}
	s.metrics.refused(p.Name, "namespace")
	s.log.Warn("request refused: namespace outside the token's scope", "token", p.Name, "namespace", ns)
	what := "namespace " + ns
	if ns == "" {
		what = "every namespace (name one)"
	}
	return &errs.Error{Code: errs.Forbidden,
		Message: fmt.Sprintf("token %s lacks scope for %s", p.Name, what),
		Fields:  []errs.FieldError{{Field: "namespace", Rule: "scope"}}}
}

// destinationRefused counts and logs the store's refusal of a namespace
// that may not use a destination (keystore: destinations.<name>.namespaces)
// as the other refusals are; any other error passes as it is.
func (s *Server) destinationRefused(c *fiber.Ctx, ns string, err error) error {
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != errs.Forbidden || len(e.Fields) == 0 || e.Fields[0].Field != "destination" {
		return err
	}
	name := tokenName(c.UserContext())
	s.metrics.refused(name, "destination")
	s.log.Warn("request refused: the destination is limited to other namespaces", "token", name, "namespace", ns, "detail", e.Message)
	return err
}

// tokenName names the sender in metrics and logs: the principal's name,
// or "none" on open routes and refused requests.
func tokenName(ctx context.Context) string {
	if p, ok := access.From(ctx); ok {
		return p.Name
	}
	return "none"
}
