package api_test

import (
	"crypto/sha256"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The tokens of the person tests: ops-ana belongs to a person; the
// harness's testToken (token-1) is shared.
const (
	anaToken = "ana-token-value-0123"
	bobToken = "bob-token-value-4567"
)

func withNamedToken() envOption {
	return withAPI(api.Config{ScopedTokens: []api.TokenScope{{Name: "ops-ana", SHA256: sha256.Sum256([]byte(anaToken)),
		Role: access.RoleAdmin, Person: "ana@example.com"}}})
}

func (e *env) postAsAna(t testing.TB, path string, body any) *resp {
	t.Helper()
	return e.callWith(t, http.MethodPost, path, body, map[string]string{"Authorization": "Bearer " + anaToken})
}

// unknownKey makes key go unknown (a timeout after the write may have
// happened), so a person must decide.
func (e *env) goneUnknown(t testing.TB, key string) map[string]any {
	t.Helper()
	tok := e.accepted(t, key)
	return wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": key, "token": tok, "reason": "outcome_unknown"}), "state_unknown")
}

func lastBy(t testing.TB, rec map[string]any) string {
	t.Helper()
	h := rec["history"].([]any)
	by, _ := h[len(h)-1].(map[string]any)["by"].(string)
	return by
}

// A decision through a named token records its person; a by naming
// someone else is refused and changes nothing; a shared token's by is
// recorded as not verified.
func TestNamedTokenRecordsThePerson(t *testing.T) {
	e := start(t, withNamedToken())
	const ana = "ana@example.com (API token ops-ana)"

	e.goneUnknown(t, "evt_1")
	r := wantOK(t, e.postAsAna(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_1", "resolution": "completed", "note": "seen in the CRM"}), "completed")
	if r["resolved_by"] != ana || lastBy(t, r) != ana {
		t.Fatalf("resolved by %v, history by %q; want %q", r["resolved_by"], lastBy(t, r), ana)
	}

	before := e.goneUnknown(t, "evt_2")
	p := wantProblem(t, e.postAsAna(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_2", "resolution": "completed", "by": "bob", "note": "n"}),
		http.StatusForbidden, "forbidden")
	if !hasField(p.Fields, "by", "token_person") || !strings.Contains(p.Detail, "ana@example.com") || !strings.Contains(p.Detail, "nothing changed") {
		t.Fatalf("refusal %+v", p)
	}
	after := e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_2").JSON(t)
	if after["state"] != "unknown" || after["updated_at"] != before["updated_at"] || after["resolved_by"] != nil {
		t.Fatalf("a refused resolve changed the key: %v", after)
	}
	// The person's own name, in any case, is them.
	r = wantOK(t, e.postAsAna(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_2", "resolution": "completed", "by": "Ana@Example.com", "note": "n"}), "completed")
	if r["resolved_by"] != ana {
		t.Fatalf("resolved by %v", r["resolved_by"])
	}

	e.goneUnknown(t, "evt_3")
	wantProblem(t, e.post(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_3", "resolution": "completed", "note": "n"}), http.StatusBadRequest, "invalid_request")
	// Too long once marked as the shared token's: refused, not cut.
	p = wantProblem(t, e.post(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_3", "resolution": "completed", "by": strings.Repeat("c", 110), "note": "n"}),
		http.StatusBadRequest, "invalid_request")
	if !hasField(p.Fields, "by", "max=128") {
		t.Fatalf("fields %+v", p.Fields)
	}
	r = wantOK(t, e.post(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_3", "resolution": "completed", "by": "carl", "note": "n"}), "completed")
	if r["resolved_by"] != "carl (via shared token token-1)" {
		t.Fatalf("a shared token's decision recorded as %v", r["resolved_by"])
	}
	if m := string(e.get(t, "/metrics").Body); !strings.Contains(m, `n8n_guard_auth_refusals_total{reason="person",token="ops-ana"} 1`) {
		t.Errorf("the refusal is not counted")
	}
}

// Four eyes over the API compares the named token's person with who
// triggered the event, whatever the body says.
func TestNamedTokenFourEyes(t *testing.T) {
	e := start(t, withNamedToken(), withPolicies(keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		ns: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}))
	resume := "http://n8n.local:5678/webhook-waiting/4711"
	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume, "owner": execOwner(resume), "requested_by": "ana@example.com", "fingerprint": "inv_1"}), "parked")

	p := wantProblem(t, e.postAsAna(t, "/v1/approve", obj{"namespace": ns, "key": "inv_1"}), http.StatusForbidden, "forbidden")
	if !strings.Contains(p.Detail, "four eyes") {
		t.Fatalf("refusal %q", p.Detail)
	}
	wantProblem(t, e.postAsAna(t, "/v1/reject", obj{"namespace": ns, "key": "inv_1", "note": "no"}), http.StatusForbidden, "forbidden")
	// Naming someone else does not get past it either.
	wantProblem(t, e.postAsAna(t, "/v1/approve", obj{"namespace": ns, "key": "inv_1", "by": "bob"}), http.StatusForbidden, "forbidden")
	if k := e.get(t, "/v1/lookup?namespace="+ns+"&key=inv_1").JSON(t); k["reason"] != "awaiting_approval" {
		t.Fatalf("a refused approval changed the key: %v", k)
	}
	ok := wantOK(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_1", "by": "bob"}), "approved")
	if ok["resolved_by"] != "bob (via shared token token-1)" {
		t.Fatalf("approved by %v", ok["resolved_by"])
	}

	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_2", "resume_url": resume + "2", "owner": execOwner(resume + "2"), "requested_by": "bob", "fingerprint": "inv_2"}), "parked")
	ok = wantOK(t, e.postAsAna(t, "/v1/approve", obj{"namespace": ns, "key": "inv_2", "note": "checked"}), "approved")
	if ok["resolved_by"] != "ana@example.com (API token ops-ana)" {
		t.Fatalf("approved by %v", ok["resolved_by"])
	}
}

// A breaker reset over the API needs a reason, and records the person and
// the reason on the breaker.
func TestResetBreakerOverHTTP(t *testing.T) {
	e := start(t, withNamedToken())
	for _, key := range []string{"evt_0", "evt_1"} {
		tok := e.accepted(t, key, obj{"destination": "hubspot"})
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": key, "token": tok, "reason": "destination_unreachable"}), "destination_failed")
	}

	p := wantProblem(t, e.postAsAna(t, "/v1/destinations/reset", obj{"destination": "hubspot", "reason": "  "}), http.StatusBadRequest, "invalid_request")
	if !hasField(p.Fields, "reason", "required,max=2000") {
		t.Fatalf("fields %+v", p.Fields)
	}
	wantProblem(t, e.postAsAna(t, "/v1/destinations/reset", obj{"destination": "hubspot", "by": "bob", "reason": "fixed"}), http.StatusForbidden, "forbidden")
	d := e.get(t, "/v1/destinations").JSON(t)["items"].([]any)[0].(map[string]any)
	if d["state"] != "open" || d["reset"] != nil {
		t.Fatalf("a refused reset changed the breaker: %v", d)
	}
	wantProblem(t, e.postAsAna(t, "/v1/destinations/reset", obj{"destination": "salesforce", "reason": "fixed"}), http.StatusNotFound, "not_found")

	r := e.postAsAna(t, "/v1/destinations/reset", obj{"destination": "hubspot", "reason": "CRM confirmed fixed"})
	if r.Status != http.StatusOK {
		t.Fatalf("reset: %s", r)
	}
	b := r.JSON(t)
	reset, _ := b["reset"].(map[string]any)
	if b["state"] != "closed" || reset == nil || reset["by"] != "ana@example.com (API token ops-ana)" || reset["reason"] != "CRM confirmed fixed" || reset["at"] == nil {
		t.Fatalf("reset answer %v", b)
	}
	d = e.get(t, "/v1/destinations").JSON(t)["items"].([]any)[0].(map[string]any)
	if reset, _ := d["reset"].(map[string]any); d["state"] != "closed" || reset == nil || reset["reason"] != "CRM confirmed fixed" {
		t.Fatalf("the listing lacks the reset: %v", d)
	}
	e.accepted(t, "evt_2", obj{"destination": "hubspot"})
}

// A maintenance window set through a named token names its person.
func TestNamedTokenHolds(t *testing.T) {
	e := start(t, withNamedToken())
	r := e.postAsAna(t, "/v1/destinations/hold", obj{"destination": "hubspot", "reason": "CRM upgrade", "until": "2026-11-30T10:00:00Z"})
	if r.Status != http.StatusOK {
		t.Fatalf("hold: %s", r)
	}
	if m, _ := r.JSON(t)["maintenance"].(map[string]any); m == nil || m["by"] != "ana@example.com (API token ops-ana)" {
		t.Fatalf("hold answer %s", r)
	}
	wantProblem(t, e.postAsAna(t, "/v1/destinations/hold/end", obj{"destination": "hubspot", "by": "bob", "reason": "done"}), http.StatusForbidden, "forbidden")
}

// A console sign-in with a token that names its person decides as that
// person, as the API does.
func TestConsoleNamedTokenRecordsThePerson(t *testing.T) {
	e := start(t, withNamedToken())
	e.goneUnknown(t, "evt_1")
	c := consoleClient(t)
	resp, _ := uiDo(t, c, "POST", e.url+"/ui/signin", url.Values{"token": {anaToken}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	_, page := uiDo(t, c, "GET", e.url+"/ui/key?namespace="+ns+"&key=evt_1", nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no form on the key page")
	}
	form := url.Values{"namespace": {ns}, "key": {"evt_1"}, "action": {"retry"}, "note": {"try again"}, "csrf": {m[1]}}
	if resp, _ = uiDo(t, c, "POST", e.url+"/ui/key/resolve", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resolve: %d", resp.StatusCode)
	}
	if rec := e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_1").JSON(t); rec["resolved_by"] != "ana@example.com (console, token ops-ana)" {
		t.Fatalf("resolved by %v", rec["resolved_by"])
	}
}

// A bulk decision through a named token records its person on every key;
// a by naming someone else is refused before any key is touched.
func TestNamedTokenBulkRecordsThePerson(t *testing.T) {
	e := start(t, withNamedToken())
	e.goneUnknown(t, "evt_1")
	e.goneUnknown(t, "evt_2")
	wantProblem(t, e.postAsAna(t, "/v1/keys/resolve-bulk", obj{"filter": obj{"namespace": ns, "key_prefix": "evt_"},
		"resolution": "failed", "by": "bob", "note": "incident 4711"}), http.StatusForbidden, "forbidden")
	if st := e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_1").JSON(t)["state"]; st != "unknown" {
		t.Fatalf("a refused bulk decided evt_1: %v", st)
	}
	r := e.postAsAna(t, "/v1/keys/resolve-bulk", obj{"filter": obj{"namespace": ns, "key_prefix": "evt_"},
		"resolution": "failed", "note": "incident 4711"})
	if r.Status != http.StatusOK || r.JSON(t)["decided"] != 2.0 {
		t.Fatalf("bulk as ana: %s", r)
	}
	for _, k := range []string{"evt_1", "evt_2"} {
		rec := e.get(t, "/v1/lookup?namespace="+ns+"&key="+k).JSON(t)
		if by := lastBy(t, rec); by != "ana@example.com (API token ops-ana)" {
			t.Fatalf("%s decided by %q", k, by)
		}
	}
}

// Four eyes over HTTP, replaying the spellings a requester could use to
// approve her own request: each is refused where it is given (400,
// nothing recorded) or spelled as hers (403 when she approves). With
// people:, her Slack user's request is hers too, and someone people:
// does not know may not decide.
// Mutations tried: the reserve's requested_by not made canonical (raw
// EqualFold as before): the space, no-break space, hyphen and fullwidth
// cases are approved; no_format dropped from requested_by: the
// zero-width case is recorded; the person comparison left out: the Slack
// user case is approved.
func TestFourEyesRefusesTheRequesterSpelledOtherwise(t *testing.T) {
	people, err := keystore.NewPeople(map[string][]string{"ana": {"ana@example.com", "ana-lopez@example.com", "U0ANA"}, "bob": {"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	gated := map[string]keystore.NamespacePolicy{ns: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}
	resume := "http://n8n.local:5678/webhook-waiting/"

	t.Run("six spellings", func(t *testing.T) {
		e := start(t, withNamedToken(), withPolicies(keystore.Policies{Namespaces: gated}))
		for i, tc := range []struct{ name, spelling, rule string }{
			{"a leading space", " ana@example.com", ""},
			{"a trailing zero-width space", "ana@example.com\u200b", "no_format"},
			{"a trailing no-break space", "ana@example.com\u00a0", ""},
			{"a Cyrillic a", "\u0430na@example.com", "one_script"},
			{"a Unicode hyphen", "ana\u2010lopez@example.com", ""},
			{"fullwidth letters", "\uff41\uff4e\uff41@example.com", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				key := "inv_" + strconv.Itoa(i)
				r := e.post(t, "/v1/reserve", obj{"namespace": ns, "key": key, "resume_url": resume + key, "owner": execOwner(resume + key), "requested_by": tc.spelling, "fingerprint": key})
				if tc.rule != "" {
					p := wantProblem(t, r, http.StatusBadRequest, "invalid_request")
					if !hasField(p.Fields, "requested_by", tc.rule) {
						t.Fatalf("fields %+v, want requested_by %s", p.Fields, tc.rule)
					}
					if k := e.get(t, "/v1/lookup?namespace="+ns+"&key="+key).JSON(t); k["found"] != false {
						t.Fatalf("a refused reserve recorded the key: %v", k)
					}
					// Nor may a decider be spelled so.
					p = wantProblem(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": key, "by": tc.spelling}), http.StatusBadRequest, "invalid_request")
					if !hasField(p.Fields, "by", tc.rule) {
						t.Fatalf("fields %+v, want by %s", p.Fields, tc.rule)
					}
					return
				}
				wantOK(t, r, "parked")
				as := anaToken
				if strings.Contains(tc.spelling, "lopez") { // her other address, through people: below
					as = ""
				}
				if as != "" {
					p := wantProblem(t, e.postAsAna(t, "/v1/approve", obj{"namespace": ns, "key": key}), http.StatusForbidden, "forbidden")
					if !hasField(p.Fields, "by", "four_eyes") {
						t.Fatalf("fields %+v", p.Fields)
					}
				} else {
					wantProblem(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": key, "by": "ANA-lopez@example.com"}), http.StatusForbidden, "forbidden")
				}
				if k := e.get(t, "/v1/lookup?namespace="+ns+"&key="+key).JSON(t); k["reason"] != "awaiting_approval" {
					t.Fatalf("a refused approval changed the key: %v", k)
				}
			})
		}
	})

	t.Run("her Slack user, her other address, and someone unknown", func(t *testing.T) {
		e := start(t, withAPI(api.Config{ScopedTokens: []api.TokenScope{
			{Name: "ops-ana", SHA256: sha256.Sum256([]byte(anaToken)), Role: access.RoleAdmin, Person: "ana@example.com"},
			{Name: "ops-bob", SHA256: sha256.Sum256([]byte(bobToken)), Role: access.RoleAdmin, Person: "bob"}}}),
			withPolicies(keystore.Policies{Namespaces: gated, People: people}))
		for i, requester := range []string{"U0ANA", "ana-lopez@example.com"} {
			key := "inv_" + strconv.Itoa(i)
			wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": key, "resume_url": resume + "1", "owner": execOwner(resume + "1"), "requested_by": requester, "fingerprint": key}), "parked")
			p := wantProblem(t, e.postAsAna(t, "/v1/approve", obj{"namespace": ns, "key": key}), http.StatusForbidden, "forbidden")
			if !hasField(p.Fields, "by", "four_eyes") || !strings.Contains(p.Detail, "four eyes") {
				t.Fatalf("%s: refusal %+v", requester, p)
			}
		}
		p := wantProblem(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_0", "by": "mallory"}), http.StatusForbidden, "forbidden")
		if !hasField(p.Fields, "by", "known_person") || !strings.Contains(p.Detail, "people:") {
			t.Fatalf("an unknown decider: %+v", p)
		}
		if k := e.get(t, "/v1/lookup?namespace="+ns+"&key=inv_0").JSON(t); k["reason"] != "awaiting_approval" {
			t.Fatalf("a refused approval changed the key: %v", k)
		}
		// A shared token vouches for nobody: its holder naming bob is not bob.
		p = wantProblem(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_0", "by": "Bob"}), http.StatusForbidden, "forbidden")
		if !hasField(p.Fields, "by", "known_person") {
			t.Fatalf("a shared token's by made its holder a known person: %+v", p)
		}
		// Bob's own token does.
		wantOK(t, e.callWith(t, http.MethodPost, "/v1/approve", obj{"namespace": ns, "key": "inv_0"},
			map[string]string{"Authorization": "Bearer " + bobToken}), "approved")
	})
}
