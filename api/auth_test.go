package api_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// The scoped tokens of the scope tests: one per role, all limited to
// crm-contacts.
var scopedTokens = map[access.Role]string{
	access.RoleReserve: "reserve-token-value",
	access.RoleRead:    "read-token-value",
	access.RoleDecide:  "decide-token-value",
	access.RoleAdmin:   "admin-token-value",
}

func withScopes() envOption {
	var ts []api.TokenScope
	for role, value := range scopedTokens {
		ts = append(ts, api.TokenScope{Name: "team-" + string(role), SHA256: sha256.Sum256([]byte(value)),
			Role: role, Namespaces: []string{ns}})
	}
	return withAPI(api.Config{ScopedTokens: ts})
}

// Every /v1 route × every role × a namespace the token may use and one it
// may not: allowed calls reach the handler (any answer but 401/403),
// refused ones are 403 forbidden naming the missing scope, and say
// nothing about whether the key exists.
func TestScopeTable(t *testing.T) {
	e := start(t, withScopes())
	const other = "billing"
	// A key that exists in each namespace, made with the unscoped token.
	for _, n := range []string{ns, other} {
		wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": n, "key": "evt_exists"}), "accepted")
	}
	type route struct {
		method, path string
		scope        access.Scope
		namespaced   bool
		// whole: the route spans every namespace; a token limited to
		// namespaces is refused whatever it names.
		whole   bool
		request func(namespace, key string) (path string, body any)
	}
	keyBody := func(extra obj) func(string, string) (string, any) {
		return func(n, k string) (string, any) {
			b := obj{"namespace": n, "key": k}
			for x, v := range extra {
				b[x] = v
			}
			return "", b
		}
	}
	routes := []route{
		{"POST", "/v1/reserve", access.ScopeWrite, true, false, keyBody(nil)},
		{"POST", "/v1/complete", access.ScopeWrite, true, false, keyBody(obj{"token": "not-the-token"})},
		{"POST", "/v1/fail", access.ScopeWrite, true, false, keyBody(obj{"token": "not-the-token", "reason": "destination_failed"})},
		{"POST", "/v1/resolve", access.ScopeDecide, true, false, keyBody(obj{"resolution": "failed", "by": "me", "note": "n"})},
		{"POST", "/v1/approve", access.ScopeDecide, true, false, keyBody(obj{"by": "me"})},
		{"POST", "/v1/reject", access.ScopeDecide, true, false, keyBody(obj{"by": "me", "note": "n"})},
		{"GET", "/v1/keys/:namespace/:key", access.ScopeLookup, true, false, func(string, string) (string, any) { return "", nil }},
		{"GET", "/v1/lookup", access.ScopeLookup, true, false, func(n, k string) (string, any) { return "?namespace=" + n + "&key=" + k, nil }},
		{"GET", "/v1/keys", access.ScopeList, true, false, func(n, _ string) (string, any) { return "?namespace=" + n, nil }},
		{"POST", "/v1/keys/resolve-bulk", access.ScopeDecide, true, false, func(n, k string) (string, any) {
			return "", obj{"filter": obj{"namespace": n, "key_prefix": k}, "resolution": "failed", "by": "me", "note": "n", "dry_run": true}
		}},
		{"GET", "/v1/destinations", access.ScopeList, false, false, func(string, string) (string, any) { return "", nil }},
		{"GET", "/v1/notifications", access.ScopeList, false, true, func(string, string) (string, any) { return "", nil }},
		{"POST", "/v1/n8n/error", access.ScopeWrite, false, false, func(string, string) (string, any) {
			return "", obj{"execution": obj{"id": "1"}, "workflow": obj{"name": "w"}}
		}},
		{"POST", "/v1/notifications/resend", access.ScopeAdmin, false, true, func(string, string) (string, any) {
			return "", obj{"id": "n_18ecca50d8f340006510bb76"}
		}},
		{"GET", "/v1/admin/backup", access.ScopeAdmin, false, true, func(string, string) (string, any) { return "", nil }},
		{"POST", "/v1/destinations/hold", access.ScopeAdmin, false, true, func(string, string) (string, any) {
			return "", obj{"destination": "hubspot", "by": "ops", "reason": "upgrade", "until": "2099-01-01T00:00:00Z"}
		}},
		{"POST", "/v1/destinations/hold/end", access.ScopeAdmin, false, true, func(string, string) (string, any) {
			return "", obj{"destination": "hubspot", "by": "ops", "reason": "done early"}
		}},
		{"POST", "/v1/destinations/reset", access.ScopeAdmin, false, true, func(string, string) (string, any) {
			return "", obj{"destination": "hubspot", "by": "ops", "reason": "CRM confirmed fixed"}
		}},
	}
	if got, want := len(routes), countV1Routes(e.srv); got != want {
		t.Fatalf("the table covers %d routes, the server has %d /v1 routes", got, want)
	}
	allows := map[access.Role][]access.Scope{
		access.RoleReserve: {access.ScopeWrite, access.ScopeLookup},
		access.RoleRead:    {access.ScopeLookup, access.ScopeList},
		access.RoleDecide:  {access.ScopeLookup, access.ScopeList, access.ScopeDecide},
		access.RoleAdmin:   {access.ScopeWrite, access.ScopeLookup, access.ScopeList, access.ScopeDecide, access.ScopeAdmin},
	}
	for _, r := range routes {
		if got := e.srv.RouteScope(r.method, r.path); got != r.scope {
			t.Errorf("%s %s needs scope %s, want %s", r.method, r.path, got, r.scope)
		}
		for role, value := range scopedTokens {
			for _, namespace := range []string{ns, other} {
				granted := false
				for _, s := range allows[role] {
					granted = granted || s == r.scope
				}
				// Every scoped token of this test is limited to ns: a
				// route spanning every namespace is out of its scope.
				inScope := (namespace == ns || !r.namespaced) && !r.whole
				name := fmt.Sprintf("%s %s as %s in %s", r.method, r.path, role, namespace)
				t.Run(name, func(t *testing.T) {
					call := func(key string) *resp {
						q, body := r.request(namespace, key)
						if body == nil && r.method == http.MethodPost {
							body = obj{}
						}
						path := strings.NewReplacer(":namespace", namespace, ":key", key).Replace(r.path)
						return e.callWith(t, r.method, path+q, body, map[string]string{"Authorization": "Bearer " + value})
					}
					res := call("evt_exists")
					switch {
					case granted && inScope:
						if res.Status == http.StatusUnauthorized || res.Status == http.StatusForbidden {
							t.Fatalf("refused: %s", res)
						}
					case !granted:
						p := wantProblem(t, res, http.StatusForbidden, "forbidden")
						if !strings.Contains(p.Detail, "scope "+string(r.scope)) || len(p.Fields) != 1 || p.Fields[0].Rule != string(r.scope) {
							t.Fatalf("the refusal does not name the missing scope %s: %+v", r.scope, p)
						}
					case r.whole:
						p := wantProblem(t, res, http.StatusForbidden, "forbidden")
						if !strings.Contains(p.Detail, "limited to namespaces "+ns) || !strings.Contains(p.Detail, "spans every namespace") ||
							len(p.Fields) != 1 || p.Fields[0].Field != "namespace" {
							t.Fatalf("the refusal does not say why (namespace limits): %+v", p)
						}
					default:
						p := wantProblem(t, res, http.StatusForbidden, "forbidden")
						if !strings.Contains(p.Detail, "namespace "+other) {
							t.Fatalf("the refusal does not name the namespace: %+v", p)
						}
						// The same answer for a key that was never seen.
						if never := call("evt_never_seen"); never.Status != res.Status || !bytes.Equal(never.Body, res.Body) {
							t.Fatalf("the refusal differs by whether the key exists:\n%s\n%s", res, never)
						}
					}
				})
			}
		}
	}
	t.Run("a name that is no namespace is a bad request, whoever asks", func(t *testing.T) {
		res := e.callWith(t, http.MethodPost, "/v1/reserve", obj{"namespace": "Not Valid", "key": "evt_1"},
			map[string]string{"Authorization": "Bearer " + scopedTokens[access.RoleReserve]})
		wantProblem(t, res, http.StatusBadRequest, "invalid_request")
	})
	t.Run("a scoped token may not list every namespace", func(t *testing.T) {
		res := e.callWith(t, http.MethodGet, "/v1/keys", nil, map[string]string{"Authorization": "Bearer " + scopedTokens[access.RoleRead]})
		wantProblem(t, res, http.StatusForbidden, "forbidden")
	})
	t.Run("the unscoped token keeps doing everything everywhere", func(t *testing.T) {
		wantOK(t, e.post(t, "/v1/resolve", obj{"namespace": other, "key": "evt_exists", "resolution": "failed", "by": "me", "note": "n", "force": true}), "failed")
		if res := e.get(t, "/v1/keys"); res.Status != http.StatusOK {
			t.Fatalf("%s", res)
		}
	})
	t.Run("metrics name the token by its name, never its value", func(t *testing.T) {
		m := string(e.callWith(t, http.MethodGet, "/metrics", nil, nil).Body)
		for _, want := range []string{
			`n8n_guard_token_requests_total{route="/v1/reserve",token="team-reserve"}`,
			`n8n_guard_token_requests_total{route="/v1/reserve",token="token-1"}`,
			`n8n_guard_auth_refusals_total{reason="scope",token="team-read"}`,
			`n8n_guard_auth_refusals_total{reason="namespace",token="team-admin"}`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		for _, v := range scopedTokens {
			if strings.Contains(m, v) {
				t.Errorf("metrics show a token's value")
			}
		}
	})
}

func countV1Routes(s *api.Server) int {
	n := 0
	for _, r := range s.Routes() {
		if strings.HasPrefix(r.Path, "/v1/") {
			n++
		}
	}
	return n
}

func TestScopedTokenConfiguration(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	for name, ts := range map[string][]api.TokenScope{
		"no name":        {{SHA256: sum, Role: access.RoleRead}},
		"unknown role":   {{Name: "a", SHA256: sum, Role: "owner"}},
		"bad namespace":  {{Name: "a", SHA256: sum, Role: access.RoleRead, Namespaces: []string{"Not Valid"}}},
		"same name":      {{Name: "a", SHA256: sum, Role: access.RoleRead}, {Name: "a", SHA256: sha256.Sum256([]byte("y")), Role: access.RoleRead}},
		"same value":     {{Name: "a", SHA256: sum, Role: access.RoleRead}, {Name: "b", SHA256: sum, Role: access.RoleAdmin}},
		"value of token": {{Name: "a", SHA256: sha256.Sum256([]byte(testToken)), Role: access.RoleRead}},
	} {
		t.Run(name, func(t *testing.T) {
			store, err := bolt.Open(filepath.Join(t.TempDir(), "g.db"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			_, err = api.New(api.Config{Store: store, Registry: prometheus.NewRegistry(), Tokens: []string{testToken}, ScopedTokens: ts})
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
		})
	}
}
