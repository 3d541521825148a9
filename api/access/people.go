package access

import (
	"fmt"
	"slices"
	"strings"
)

// PersonRoles are the roles a person signed in through an identity
// provider may be given: the token roles without reserve (a person does
// not run workflows).
var PersonRoles = []Role{RoleRead, RoleDecide, RoleAdmin}

// PersonRule gives a role to one person (Person, matched against the name
// the identity provider vouched for, case-insensitively) or to every
// member of a group (Group, matched exactly against the groups claim).
type PersonRule struct {
	Person     string
	Group      string
	Role       Role
	Namespaces []string // empty: every namespace
}

// People are the rules of the console's named sign-in, read top to
// bottom: the first rule naming the person or one of their groups decides
// their role, as the owners: rules do. Nobody matched may not sign in.
type People []PersonRule

// Check refuses a rule that names nobody, or both a person and a group, or
// a role a person may not have; valid says whether a namespace name is one.
func (ps People) Check(valid func(string) bool) error {
	for i, r := range ps {
		where := fmt.Sprintf("rule %d", i+1)
		if (r.Person == "") == (r.Group == "") {
			return fmt.Errorf("%s: give exactly one of person (a name or email) or group", where)
		}
		if !slices.Contains(PersonRoles, r.Role) {
			return fmt.Errorf("%s: role %q must be one of %v", where, r.Role, PersonRoles)
		}
		for _, ns := range r.Namespaces {
			if !valid(ns) {
				return fmt.Errorf("%s: %q is not a valid namespace name", where, ns)
			}
		}
	}
	return nil
}

// Principal returns the principal of a person named name with groups, and
// false when no rule names them.
func (ps People) Principal(name string, groups []string) (Principal, bool) {
	for _, r := range ps {
		if (r.Person != "" && strings.EqualFold(r.Person, name)) || (r.Group != "" && slices.Contains(groups, r.Group)) {
			return Principal{Name: name, Role: r.Role, Namespaces: slices.Clone(r.Namespaces), Person: true}, true
		}
	}
	return Principal{}, false
}

// Named returns those of groups that a rule names.
func (ps People) Named(groups []string) []string {
	var out []string
	for _, g := range groups {
		if slices.ContainsFunc(ps, func(r PersonRule) bool { return r.Group == g }) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}
