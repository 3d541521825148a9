package api_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/api"
)

// unknownKey reserves key in namespace and reports outcome_unknown.
func (e *env) unknownKey(t *testing.T, namespace, key string) {
	t.Helper()
	a := e.post(t, "/v1/reserve", obj{"namespace": namespace, "key": key, "owner": "n8n LeadCrm exec 7"})
	token := wantOK(t, a, "accepted")["token"]
	wantOK(t, e.post(t, "/v1/fail", obj{"namespace": namespace, "key": key, "token": token, "reason": "outcome_unknown"}), "state_unknown")
}

func (e *env) keyState(t *testing.T, namespace, key string) (state string, last map[string]any) {
	t.Helper()
	m := wantOK(t, e.get(t, "/v1/keys/"+namespace+"/"+key), "found")
	h := m["history"].([]any)
	return m["state"].(string), h[len(h)-1].(map[string]any)
}

// POST /v1/keys/resolve-bulk over loopback HTTP: a dry run counts and
// changes nothing, the decision names the action and the person in every
// key's history, a repeat with the answer's id decides nothing, bad input
// is a problem and changes nothing, and a token limited to a namespace
// decides only in it.
func TestResolveBulk(t *testing.T) {
	e := start(t, withScopes())
	for i := range 5 {
		e.unknownKey(t, ns, fmt.Sprintf("ord-%d", i))
	}
	e.unknownKey(t, "billing", "ord-9")
	e.reserve(t, "ord-live") // a live lease: skipped
	body := obj{"filter": obj{"key_prefix": "ord-"}, "resolution": "failed", "by": "ann@example.com",
		"note": "CRM incident 4711: retry after the fix"}

	dry := obj{"dry_run": true}
	for k, v := range body {
		dry[k] = v
	}
	r := e.post(t, "/v1/keys/resolve-bulk", dry)
	if r.Status != http.StatusOK {
		t.Fatalf("dry run: %s", r)
	}
	got := r.JSON(t)
	if got["matched"] != 7.0 || got["decided"] != 6.0 || got["dry_run"] != true || got["skipped"].(map[string]any)["live_lease"] != 1.0 {
		t.Fatalf("dry run answer %s", r.Body)
	}
	if st, _ := e.keyState(t, ns, "ord-0"); st != "unknown" {
		t.Fatalf("a dry run decided ord-0: %s", st)
	}

	r = e.post(t, "/v1/keys/resolve-bulk", body)
	got = r.JSON(t)
	id, _ := got["id"].(string)
	if r.Status != http.StatusOK || got["decided"] != 6.0 || got["dry_run"] != false || !regexp.MustCompile(`^b-[0-9a-f]{8}$`).MatchString(id) {
		t.Fatalf("bulk answer %s", r)
	}
	for _, k := range []struct{ ns, key string }{{ns, "ord-0"}, {ns, "ord-4"}, {"billing", "ord-9"}} {
		st, last := e.keyState(t, k.ns, k.key)
		if by, _ := last["by"].(string); st != "failed" || !strings.HasPrefix(by, "ann@example.com (via shared token ") || last["detail"] != "bulk "+id+", failed: CRM incident 4711: retry after the fix" {
			t.Fatalf("%s/%s after the bulk: %s %v", k.ns, k.key, st, last)
		}
	}
	if st, _ := e.keyState(t, ns, "ord-live"); st != "reserved" {
		t.Fatalf("the live key was decided: %s", st)
	}

	repeat := obj{"id": id}
	for k, v := range body {
		repeat[k] = v
	}
	r = e.post(t, "/v1/keys/resolve-bulk", repeat)
	if got = r.JSON(t); r.Status != http.StatusOK || got["decided"] != 0.0 || got["skipped"].(map[string]any)["already_decided"] != 6.0 {
		t.Fatalf("repeat: %s", r)
	}

	t.Run("bad input is a problem and changes nothing", func(t *testing.T) {
		e.unknownKey(t, ns, "bad-1")
		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"no person", obj{"filter": obj{"namespace": ns}, "resolution": "failed", "note": "n"}, "by"},
			{"no note", obj{"filter": obj{"namespace": ns}, "resolution": "failed", "by": "ann"}, "note"},
			{"resolution unknown", obj{"filter": obj{"namespace": ns}, "resolution": "maybe", "by": "ann", "note": "n"}, "resolution"},
			{"state unknown", obj{"filter": obj{"states": []string{"lost"}}, "resolution": "failed", "by": "ann", "note": "n"}, ""},
			{"time range backwards", obj{"filter": obj{"from": "2026-12-02T00:00:00Z", "to": "2026-12-01T00:00:00Z"}, "resolution": "failed", "by": "ann", "note": "n"}, "to"},
			{"time not a time", `{"filter":{"from":"yesterday"},"resolution":"failed","by":"ann","note":"n"}`, ""},
			{"filter not an object", `{"filter":"ord-","resolution":"failed","by":"ann","note":"n"}`, "filter"},
			{"no filter", obj{"resolution": "failed", "by": "ann", "note": "n"}, "filter"},
			{"empty filter", obj{"filter": obj{}, "resolution": "failed", "by": "ann", "note": "n"}, "filter"},
			{"blank filter", obj{"filter": obj{"namespace": " ", "text": " "}, "resolution": "failed", "by": "ann", "note": "n", "dry_run": true}, "filter"},
			{"not JSON", `resolve everything`, ""},
		} {
			p := wantProblem(t, e.post(t, "/v1/keys/resolve-bulk", c.body), http.StatusBadRequest, "invalid_request")
			if c.field != "" && !hasField(p.Fields, c.field, "") {
				t.Errorf("%s: fields %+v, want %s", c.name, p.Fields, c.field)
			}
		}
		if st, _ := e.keyState(t, ns, "bad-1"); st != "unknown" {
			t.Fatalf("a refused bulk decided bad-1: %s", st)
		}
	})

	t.Run("a token limited to a namespace decides only in it", func(t *testing.T) {
		e.unknownKey(t, ns, "team-1")
		e.unknownKey(t, "billing", "team-2")
		as := func(token string, b obj) *resp {
			return e.callWith(t, http.MethodPost, "/v1/keys/resolve-bulk", b, map[string]string{"Authorization": "Bearer " + token})
		}
		admin := scopedTokens["admin"]
		b := obj{"filter": obj{"key_prefix": "team-"}, "resolution": "failed", "by": "ann", "note": "n"}
		p := wantProblem(t, as(admin, b), http.StatusForbidden, "forbidden")
		if !strings.Contains(p.Detail, "every namespace") {
			t.Fatalf("the refusal does not say a namespace is needed: %+v", p)
		}
		b["filter"] = obj{"key_prefix": "team-", "namespace": "billing"}
		wantProblem(t, as(admin, b), http.StatusForbidden, "forbidden")
		b["filter"] = obj{"key_prefix": "team-", "namespace": ns}
		wantProblem(t, as(scopedTokens["read"], b), http.StatusForbidden, "forbidden")
		dry := obj{"dry_run": true}
		for k, v := range b {
			dry[k] = v
		}
		if r := as(scopedTokens["decide"], dry); r.Status != http.StatusOK || r.JSON(t)["decided"] != 1.0 {
			t.Fatalf("the decide role counting in its namespace: %s", r)
		}
		if st, _ := e.keyState(t, "billing", "team-2"); st != "unknown" {
			t.Fatalf("a refused bulk decided billing/team-2: %s", st)
		}
		r := as(admin, b)
		if got := r.JSON(t); r.Status != http.StatusOK || got["matched"] != 1.0 || got["decided"] != 1.0 {
			t.Fatalf("in its namespace: %s", r)
		}
		if st, _ := e.keyState(t, "billing", "team-2"); st != "unknown" {
			t.Fatalf("a bulk limited to %s decided billing/team-2: %s", ns, st)
		}
	})
}

// Over HTTP the domain's two bulk rules: a request without a selection is
// refused (400, field filter, rule required; the store was not asked to
// walk every key), and a bulk id sent again with other content is 409
// conflict naming the field id, changing nothing, while the same content
// again is a repeat that decides nothing twice.
func TestResolveBulkRefusesNoSelectionAndAReusedIDWithOtherContent(t *testing.T) {
	e := start(t)
	e.unknownKey(t, ns, "ord-1")
	e.unknownKey(t, ns, "ord-2")
	e.unknownKey(t, "billing", "ord-3")
	for _, f := range []any{nil, obj{}, obj{"namespace": "", "states": []string{}}} {
		body := obj{"resolution": "failed", "by": "ann", "note": "everything"}
		if f != nil {
			body["filter"] = f
		}
		p := wantProblem(t, e.post(t, "/v1/keys/resolve-bulk", body), http.StatusBadRequest, "invalid_request")
		if !hasField(p.Fields, "filter", "required") || !strings.Contains(p.Detail, "never takes every key") {
			t.Fatalf("filter %v: %+v", f, p)
		}
	}
	for _, k := range []struct{ ns, key string }{{ns, "ord-1"}, {"billing", "ord-3"}} {
		if st, _ := e.keyState(t, k.ns, k.key); st != "unknown" {
			t.Fatalf("a bulk without a selection decided %s/%s: %s", k.ns, k.key, st)
		}
	}

	body := obj{"filter": obj{"namespace": ns, "key_prefix": "ord-"}, "resolution": "failed", "by": "ann", "note": "CRM incident 4711", "id": "b-0000beef"}
	r := e.post(t, "/v1/keys/resolve-bulk", body)
	if got := r.JSON(t); r.Status != http.StatusOK || got["decided"] != 2.0 || got["id"] != "b-0000beef" {
		t.Fatalf("first run: %s", r)
	}
	before := string(e.get(t, "/v1/keys?namespace="+ns).Body) + string(e.get(t, "/v1/keys?namespace=billing").Body)
	for name, change := range map[string]obj{
		"another note":      {"note": "CRM incident 4712"},
		"another selection": {"filter": obj{"namespace": "billing"}},
		"another decision":  {"resolution": "completed"},
		"another person":    {"by": "bob"},
	} {
		other := obj{}
		for k, v := range body {
			other[k] = v
		}
		for k, v := range change {
			other[k] = v
		}
		p := wantProblem(t, e.post(t, "/v1/keys/resolve-bulk", other), http.StatusConflict, "conflict")
		if !hasField(p.Fields, "id", "unique") || !strings.Contains(p.Detail, "b-0000beef") {
			t.Fatalf("%s: %+v", name, p)
		}
	}
	if after := string(e.get(t, "/v1/keys?namespace="+ns).Body) + string(e.get(t, "/v1/keys?namespace=billing").Body); after != before {
		t.Fatalf("a reused id changed keys:\nbefore %s\nafter  %s", before, after)
	}
	r = e.post(t, "/v1/keys/resolve-bulk", body)
	if got := r.JSON(t); r.Status != http.StatusOK || got["decided"] != 0.0 || got["skipped"].(map[string]any)["already_decided"] != 2.0 {
		t.Fatalf("the same content again: %s", r)
	}
}

// kicks stands in for the re-run worker (rerun.Runner).
type kicks struct{ n atomic.Int32 }

func (k *kicks) Kick() { k.n.Add(1) }

// gatedKey makes a failed key whose execution waits at its re-run gate.
func (e *env) gatedKey(t *testing.T, key, owner string) {
	t.Helper()
	token := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": key, "owner": owner}), "accepted")["token"]
	wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": key, "token": token, "reason": "destination_failed"}), "destination_failed")
	wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": key, "owner": owner, "rerun": true}), http.StatusConflict, "rerun_not_granted")
}

// POST /v1/keys/resolve-bulk with rerun: the keys whose execution waits
// at its re-run gate are granted, the others skipped as no_rerun_gate,
// and the re-run worker is woken once; a guard without n8n's API refuses.
func TestResolveBulkRerun(t *testing.T) {
	body := obj{"filter": obj{"namespace": ns, "states": []string{"failed"}}, "resolution": "failed", "rerun": true,
		"by": "ann@example.com", "note": "CRM back"}
	t.Run("with n8n's API", func(t *testing.T) {
		kick := &kicks{}
		e := start(t, withAPI(api.Config{Reruns: kick}))
		e.gatedKey(t, "ord-1", "n8n wf1 exec 42")
		e.gatedKey(t, "ord-2", "n8n wf1 exec 43")
		token := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "ord-3", "owner": "n8n wf1 exec 44"}), "accepted")["token"]
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "ord-3", "token": token, "reason": "destination_failed"}), "destination_failed")

		r := e.post(t, "/v1/keys/resolve-bulk", body)
		got := r.JSON(t)
		if r.Status != http.StatusOK || got["decided"] != 2.0 || got["skipped"].(map[string]any)["no_rerun_gate"] != 1.0 {
			t.Fatalf("bulk re-run: %s", r)
		}
		for _, key := range []string{"ord-1", "ord-2"} {
			if _, last := e.keyState(t, ns, key); last["event"] != "rerun_granted" {
				t.Errorf("%s: %v", key, last)
			}
		}
		if _, last := e.keyState(t, ns, "ord-3"); last["event"] != "failed" {
			t.Errorf("ord-3, at no gate, was decided: %v", last)
		}
		if kick.n.Load() != 1 {
			t.Fatalf("kicks %d, want 1", kick.n.Load())
		}
		repeat := obj{"id": got["id"]}
		for k, v := range body {
			repeat[k] = v
		}
		if r := e.post(t, "/v1/keys/resolve-bulk", repeat); r.Status != http.StatusOK || r.JSON(t)["decided"] != 0.0 || kick.n.Load() != 1 {
			t.Fatalf("repeat: %s, kicks %d", r, kick.n.Load())
		}
	})
	t.Run("without n8n's API", func(t *testing.T) {
		e := start(t)
		e.gatedKey(t, "ord-1", "n8n wf1 exec 42")
		wantProblem(t, e.post(t, "/v1/keys/resolve-bulk", body), http.StatusNotImplemented, "unsupported")
		if _, last := e.keyState(t, ns, "ord-1"); last["event"] != "rerun_gate" {
			t.Fatalf("a refused bulk re-run changed ord-1: %v", last)
		}
	})
}
