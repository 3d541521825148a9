package access_test

import (
	"slices"
	"testing"

	"github.com/n8n-guard/n8n-guard/api/access"
)

// The people rules: the first that names the person or a group of theirs
// decides; roles map to the token roles' scopes.
func TestPeople(t *testing.T) {
	ps := access.People{
		{Person: "ana@example.com", Role: access.RoleRead},
		{Group: "oncall", Role: access.RoleDecide, Namespaces: []string{"crm"}},
		{Group: "admins", Role: access.RoleAdmin},
	}
	if err := ps.Check(func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		groups []string
		role   access.Role
		decide bool
	}{
		{"ANA@example.com", []string{"admins"}, access.RoleRead, false}, // her own rule comes first
		{"bo@example.com", []string{"admins", "oncall"}, access.RoleDecide, true},
		{"cy@example.com", []string{"admins"}, access.RoleAdmin, true},
	} {
		p, ok := ps.Principal(tc.name, tc.groups)
		if !ok || p.Role != tc.role || p.CanAct() != tc.decide || !p.Person || p.Identity() != "person:"+tc.name {
			t.Errorf("%s %v: %+v", tc.name, tc.groups, p)
		}
	}
	if p, _ := ps.Principal("bo@example.com", []string{"oncall"}); p.MayUse("billing") || !p.MayUse("crm") || p.CanOperate() {
		t.Errorf("decide in crm: %+v", p)
	}
	if _, ok := ps.Principal("eve@example.com", []string{"staff"}); ok {
		t.Error("nobody's rule named eve")
	}
	if got := ps.Named([]string{"staff", "oncall", "admins", "oncall"}); !slices.Equal(got, []string{"oncall", "admins"}) {
		t.Errorf("named groups %v", got)
	}
	for name, bad := range map[string]access.People{
		"nobody":          {{Role: access.RoleRead}},
		"both":            {{Person: "a", Group: "g", Role: access.RoleRead}},
		"a reserve human": {{Person: "a", Role: access.RoleReserve}},
		"no role":         {{Person: "a"}},
	} {
		if err := bad.Check(func(string) bool { return true }); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
