package api_test

import (
	"net/http"
	"testing"
)

// A token limited to namespace ns cannot decide keys of another namespace
// through POST /v1/keys/resolve-bulk by padding the filter's namespace
// with a space: the scope is checked on the namespace as the store reads
// it (keystore.Filter.Normalize trims it), not on the raw field.
func TestBulkPaddedNamespaceStaysInTheTokensScope(t *testing.T) {
	e := start(t, withScopes())
	e.unknownKey(t, "billing", "pad-1")
	admin := scopedTokens["admin"] // limited to ns
	for _, padded := range []string{" billing", "billing ", "\tbilling"} {
		b := obj{"filter": obj{"namespace": padded, "key_prefix": "pad-"}, "resolution": "failed", "by": "ann", "note": "n", "dry_run": true}
		r := e.callWith(t, http.MethodPost, "/v1/keys/resolve-bulk", b, map[string]string{"Authorization": "Bearer " + admin})
		if r.Status == http.StatusOK {
			t.Errorf("namespace %q: a token limited to %s was answered %s", padded, ns, r.Body)
		}
	}
	b := obj{"filter": obj{"namespace": " billing", "key_prefix": "pad-"}, "resolution": "failed", "by": "ann", "note": "n"}
	e.callWith(t, http.MethodPost, "/v1/keys/resolve-bulk", b, map[string]string{"Authorization": "Bearer " + admin})
	if st, _ := e.keyState(t, "billing", "pad-1"); st != "unknown" {
		t.Errorf("a token limited to %s decided billing/pad-1 through a padded namespace: %s", ns, st)
	}
}
