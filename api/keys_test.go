package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The reserve table of the contract, one case per outcome, over HTTP.
func TestReserveOutcomes(t *testing.T) {
	t.Run("first event is accepted", func(t *testing.T) {
		e := start(t)
		a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "owner": "n8n exec 4711", "lease_seconds": 120}), "accepted")
		if a["proceed"] != true || a["token"] == "" || a["state"] != "reserved" || a["attempt"] != 1.0 {
			t.Fatalf("accepted answer: %v", a)
		}
		if a["namespace"] != ns || a["key"] != "evt_1" || a["owner"] != "n8n exec 4711" {
			t.Fatalf("record fields must be flat at the top level: %v", a)
		}
		if _, nested := a["record"]; nested {
			t.Fatalf("record must not be nested: %v", a)
		}
		want := e.clock.Now().Add(120 * time.Second).Format(time.RFC3339)
		if a["lease_expires_at"] != want {
			t.Fatalf("lease_expires_at = %v, want %s", a["lease_expires_at"], want)
		}
	})
	t.Run("sequential repeat is a duplicate with the stored result", func(t *testing.T) {
		e := start(t)
		tok := e.accepted(t, "evt_1")
		wantOK(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "evt_1", "token": tok, "result_ref": "crm-contact-789", "result": obj{"id": 789}}), "completed")
		r := e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"})
		d := wantOK(t, r, "duplicate_event")
		if d["proceed"] != false || d["token"] != nil || d["result_ref"] != "crm-contact-789" || d["state"] != "completed" {
			t.Fatalf("duplicate answer: %v", d)
		}
		if res, _ := d["result"].(map[string]any); res["id"] != 789.0 {
			t.Fatalf("stored result not returned: %v", d["result"])
		}
		if got := r.Header.Get("Idempotent-Replayed"); got != "true" {
			t.Fatalf("Idempotent-Replayed = %q, want true", got)
		}
	})
	t.Run("two copies at once: in_progress with retry_after_seconds", func(t *testing.T) {
		e := start(t)
		e.accepted(t, "evt_1", obj{"lease_seconds": 120})
		e.clock.Advance(20 * time.Second)
		r := e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"})
		p := wantOK(t, r, "in_progress")
		if p["proceed"] != false || p["token"] != nil || p["retry_after_seconds"] != 100.0 {
			t.Fatalf("in_progress answer: %v", p)
		}
		if r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("in_progress is not a replay")
		}
	})
	t.Run("twenty copies at once over HTTP: exactly one accepted", func(t *testing.T) {
		e := start(t)
		var mu sync.Mutex
		outcomes := map[string]int{}
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_storm", "payload": obj{"n": 1}})
				m := r.JSON(t)
				mu.Lock()
				outcomes[fmt.Sprint(m["outcome"])]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if outcomes["accepted"] != 1 || outcomes["in_progress"] != 19 {
			t.Fatalf("outcomes = %v, want 1 accepted and 19 in_progress", outcomes)
		}
	})
	t.Run("lease ran out: state_unknown", func(t *testing.T) {
		e := start(t)
		e.accepted(t, "evt_1", obj{"lease_seconds": 60})
		e.clock.Advance(61 * time.Second)
		u := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"}), "state_unknown")
		if u["proceed"] != false || u["state"] != "unknown" || u["reason"] != "lease_expired" {
			t.Fatalf("state_unknown answer: %v", u)
		}
	})
	t.Run("lease ran out in a reclaim namespace: accepted, attempt 2", func(t *testing.T) {
		e := start(t, withPolicies(keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
			ns: {OnLeaseExpiry: keystore.ExpireReclaim},
		}}))
		first := e.accepted(t, "evt_1", obj{"lease_seconds": 60})
		e.clock.Advance(61 * time.Second)
		a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"}), "accepted")
		if a["attempt"] != 2.0 || a["token"] == first {
			t.Fatalf("reclaim: %v", a)
		}
	})
	t.Run("failed and retryable: accepted, attempt 2", func(t *testing.T) {
		e := start(t)
		tok := e.accepted(t, "evt_1")
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_1", "token": tok, "reason": "destination_failed", "message": "HTTP 503 from CRM"}), "destination_failed")
		a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"}), "accepted")
		if a["attempt"] != 2.0 || a["proceed"] != true {
			t.Fatalf("retry: %v", a)
		}
	})
	t.Run("failed for bad data: rejected", func(t *testing.T) {
		e := start(t)
		tok := e.accepted(t, "evt_1")
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_1", "token": tok, "reason": "validation_failed", "message": "HTTP 422: email invalid"}), "rejected")
		r := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"}), "rejected")
		if r["proceed"] != false || r["state"] != "failed" || r["retryable"] != false {
			t.Fatalf("rejected: %v", r)
		}
	})
	t.Run("unknown key: state_unknown until a person resolves it", func(t *testing.T) {
		e := start(t)
		tok := e.accepted(t, "evt_1")
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_1", "token": tok, "reason": "outcome_unknown", "message": "timeout after 30s"}), "state_unknown")
		wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"}), "state_unknown")
	})
	t.Run("destination unreachable for two keys: breaker opens, destination_paused", func(t *testing.T) {
		e := start(t)
		for _, key := range []string{"evt_0", "evt_1"} {
			tok := e.accepted(t, key, obj{"destination": "hubspot"})
			wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": key, "token": tok, "reason": "destination_unreachable", "message": "connection refused"}), "destination_failed")
		}
		r := e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_2", "destination": "hubspot"})
		p := wantOK(t, r, "destination_paused")
		if p["proceed"] != false || p["retry_after_seconds"] != 300.0 || r.Header.Get("Retry-After") != "300" {
			t.Fatalf("destination_paused: %v, Retry-After %q", p, r.Header.Get("Retry-After"))
		}
		if p["state"] != "absent" || p["key"] != "evt_2" || p["namespace"] != ns {
			t.Fatalf("a paused reserve records nothing about a new key: %v", p)
		}
		wantOK(t, e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_2"), "absent")
		d := e.get(t, "/v1/destinations").JSON(t)
		items := d["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["state"] != "open" || items[0].(map[string]any)["paused_reserves"] != 1.0 {
			t.Fatalf("destinations: %v", d)
		}
	})
	t.Run("same key, different payload: 422 key_reused", func(t *testing.T) {
		e := start(t)
		e.accepted(t, "evt_1", obj{"payload": obj{"email_hash": "a"}})
		wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "payload": obj{"email_hash": "b"}}), 422, "key_reused")
		// Same payload, other member order: the same canonical form.
		wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "payload": obj{"email_hash": "a"}}), "in_progress")
	})
	t.Run("numeric key from an n8n expression", func(t *testing.T) {
		e := start(t)
		a := wantOK(t, e.post(t, "/v1/reserve", `{"namespace":"crm-contacts","key":4711}`), "accepted")
		if a["key"] != "4711" {
			t.Fatalf("key = %v", a["key"])
		}
	})
	t.Run("key is trimmed", func(t *testing.T) {
		e := start(t)
		a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "  evt_1 \n"}), "accepted")
		if a["key"] != "evt_1" {
			t.Fatalf("key = %q", a["key"])
		}
	})
}

func TestComplete(t *testing.T) {
	e := start(t)
	tok := e.accepted(t, "evt_1")
	body := obj{"namespace": ns, "key": "evt_1", "token": tok, "result_ref": "crm-contact-789"}
	c := wantOK(t, e.post(t, "/v1/complete", body), "completed")
	if c["state"] != "completed" || c["via"] != "primary" || c["expires_at"] == nil || c["proceed"] != false {
		t.Fatalf("completed: %v", c)
	}
	t.Run("the same call again: same answer, replayed", func(t *testing.T) {
		r := e.post(t, "/v1/complete", body)
		wantOK(t, r, "completed")
		if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("repeated complete must be marked replayed")
		}
	})
	t.Run("token of an older attempt: 409 stale_token", func(t *testing.T) {
		tok1 := e.accepted(t, "evt_2")
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_2", "token": tok1, "reason": "destination_failed"}), "destination_failed")
		e.accepted(t, "evt_2")
		wantProblem(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "evt_2", "token": tok1}), 409, "stale_token")
	})
	t.Run("unknown key: 404 not_found", func(t *testing.T) {
		wantProblem(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "never", "token": "1.abc"}), 404, "not_found")
	})
	t.Run("late confirmation of a key that went unknown", func(t *testing.T) {
		tok := e.accepted(t, "evt_3", obj{"lease_seconds": 10})
		e.clock.Advance(11 * time.Second)
		wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_3"}), "state_unknown")
		wantOK(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "evt_3", "token": tok}), "completed")
	})
	t.Run("complete after fail: 409 conflict", func(t *testing.T) {
		tok := e.accepted(t, "evt_4")
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_4", "token": tok, "reason": "destination_failed"}), "destination_failed")
		wantProblem(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "evt_4", "token": tok}), 409, "conflict")
	})
	t.Run("via fallback is counted", func(t *testing.T) {
		tok := e.accepted(t, "evt_5")
		c := wantOK(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "evt_5", "token": tok, "via": "fallback"}), "completed")
		if c["via"] != "fallback" {
			t.Fatalf("via = %v", c["via"])
		}
		m := e.get(t, "/metrics")
		if !strings.Contains(string(m.Body), `n8n_guard_fallback_completions_total{namespace="crm-contacts"} 1`) {
			t.Fatalf("fallback completion not counted:\n%s", m.Body)
		}
	})
}

func TestFail(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		retryable    any
		outcome      string
		state        string
		retry        bool
	}{
		{"destination unreachable", "destination_unreachable", nil, "destination_failed", "failed", true},
		{"destination failed (5xx)", "destination_failed", nil, "destination_failed", "failed", true},
		{"destination failed, not retryable", "destination_failed", false, "rejected", "failed", false},
		{"validation failed (4xx)", "validation_failed", nil, "rejected", "failed", false},
		{"outcome unknown (timeout)", "outcome_unknown", nil, "state_unknown", "unknown", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t)
			tok := e.accepted(t, "evt_1")
			body := obj{"namespace": ns, "key": "evt_1", "token": tok, "reason": tc.reason, "message": "HTTP 503 from CRM"}
			if tc.retryable != nil {
				body["retryable"] = tc.retryable
			}
			f := wantOK(t, e.post(t, "/v1/fail", body), tc.outcome)
			if f["state"] != tc.state || f["retryable"] != tc.retry || f["reason"] != tc.reason || f["message"] != "HTTP 503 from CRM" {
				t.Fatalf("fail answer: %v", f)
			}
			r := e.post(t, "/v1/fail", body)
			wantOK(t, r, tc.outcome)
			if r.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("a repeated fail is a replay")
			}
		})
	}
}

func TestResolve(t *testing.T) {
	e := start(t)
	unknown := func(key string) {
		tok := e.accepted(t, key)
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": key, "token": tok, "reason": "outcome_unknown"}), "state_unknown")
	}
	t.Run("unknown to completed", func(t *testing.T) {
		unknown("evt_1")
		r := wantOK(t, e.post(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_1", "resolution": "completed",
			"by": "office manager", "note": "checked the Sent folder: mail went out", "result_ref": "mail-42"}), "completed")
		if r["state"] != "completed" || r["resolved_by"] != "office manager (via shared token token-1)" || r["resolved_at"] == nil || r["result_ref"] != "mail-42" {
			t.Fatalf("resolve: %v", r)
		}
		h := r["history"].([]any)
		if last := h[len(h)-1].(map[string]any); last["event"] != "resolved" || last["by"] != "office manager (via shared token token-1)" {
			t.Fatalf("resolution not in history: %v", h)
		}
		wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"}), "duplicate_event")
	})
	t.Run("unknown to failed: the next reserve may try again", func(t *testing.T) {
		unknown("evt_2")
		r := wantOK(t, e.post(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_2", "resolution": "failed",
			"by": "office manager", "note": "not in the Sent folder"}), "failed")
		if r["state"] != "failed" || r["retryable"] != true {
			t.Fatalf("resolve failed: %v", r)
		}
		wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_2"}), "accepted")
	})
	t.Run("a live reservation: 409 conflict, unless force", func(t *testing.T) {
		e.accepted(t, "evt_3")
		body := obj{"namespace": ns, "key": "evt_3", "resolution": "failed", "by": "ops", "note": "stuck worker killed"}
		wantProblem(t, e.post(t, "/v1/resolve", body), 409, "conflict")
		body["force"] = true
		wantOK(t, e.post(t, "/v1/resolve", body), "failed")
	})
	t.Run("by and note are required", func(t *testing.T) {
		unknown("evt_4")
		p := wantProblem(t, e.post(t, "/v1/resolve", obj{"namespace": ns, "key": "evt_4", "resolution": "completed"}), 400, "invalid_request")
		if !hasField(p.Fields, "by", "required") || !hasField(p.Fields, "note", "required") {
			t.Fatalf("fields = %v", p.Fields)
		}
	})
	t.Run("a key never seen: 404 not_found", func(t *testing.T) {
		wantProblem(t, e.post(t, "/v1/resolve", obj{"namespace": ns, "key": "never", "resolution": "completed", "by": "a", "note": "b"}), 404, "not_found")
	})
}

func TestLookup(t *testing.T) {
	e := start(t)
	a := wantOK(t, e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_1"), "absent")
	if a["found"] != false || a["state"] != "absent" || a["namespace"] != ns || a["key"] != "evt_1" || a["proceed"] != false {
		t.Fatalf("absent lookup: %v", a)
	}
	e.accepted(t, "evt_1")
	f := wantOK(t, e.get(t, "/v1/lookup?"+url.Values{"namespace": {ns}, "key": {" evt_1 "}}.Encode()), "found")
	if f["found"] != true || f["state"] != "reserved" || f["token"] != nil || f["proceed"] != false {
		t.Fatalf("found lookup: %v", f)
	}
	wantProblem(t, e.get(t, "/v1/lookup?namespace=Bad+NS&key=evt_1"), 400, "invalid_request")
	wantProblem(t, e.get(t, "/v1/lookup?namespace="+ns), 400, "invalid_key")
}

// GET /v1/keys/{namespace}/{key}, where docs/api.md and the runbooks send
// a client after store_outcome_unknown, answers as /v1/lookup does.
func TestKeyByPath(t *testing.T) {
	e := start(t)
	const slashed = "orders/2024/evt 1"
	path := func(key string) string { return "/v1/keys/" + ns + "/" + url.PathEscape(key) }
	for _, key := range []string{"evt_1", slashed} {
		if a, b := e.get(t, path(key)), e.get(t, "/v1/lookup?"+url.Values{"namespace": {ns}, "key": {key}}.Encode()); a.Status != 200 || string(a.Body) != string(b.Body) {
			t.Fatalf("absent %q: %s, lookup %s", key, a, b)
		}
		tok := e.accepted(t, key)
		a := wantOK(t, e.get(t, path(key)), "found")
		if a["found"] != true || a["key"] != key || a["state"] != "reserved" || a["token"] != nil {
			t.Fatalf("found %q: %v", key, a)
		}
		wantOK(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": key, "token": tok}), "completed")
		if a := wantOK(t, e.get(t, path(key)), "found"); a["state"] != "completed" {
			t.Fatalf("after complete: %v", a)
		}
	}
	wantProblem(t, e.get(t, "/v1/keys/Bad%20NS/evt_1"), 400, "invalid_request")
	wantProblem(t, e.get(t, "/v1/keys/"+ns+"/"+url.PathEscape(strings.Repeat("k", 256))), 400, "invalid_key")
	// A path that is not a route is never mistaken for an absent key.
	wantProblem(t, e.get(t, "/v1/keys/"+ns+"/evt_1/extra"), 404, "route_not_found")
	wantProblem(t, e.get(t, "/v1/key/"+ns+"/evt_1"), 404, "route_not_found")
}

func TestListKeys(t *testing.T) {
	e := start(t)
	for i := 0; i < 5; i++ {
		tok := e.accepted(t, fmt.Sprintf("evt_%d", i))
		if i%2 == 0 {
			wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": fmt.Sprintf("evt_%d", i), "token": tok, "reason": "outcome_unknown"}), "state_unknown")
		}
	}
	e.accepted(t, "other", obj{"namespace": "bookings"})

	page := e.get(t, "/v1/keys?state=unknown").JSON(t)
	if items := page["items"].([]any); len(items) != 3 {
		t.Fatalf("unknown keys: %v", page)
	}
	if _, ok := page["next_cursor"]; ok {
		t.Fatalf("no next_cursor on the last page: %v", page)
	}
	var keys []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := url.Values{"namespace": {ns}, "limit": {"2"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		p := e.get(t, "/v1/keys?"+q.Encode()).JSON(t)
		for _, it := range p["items"].([]any) {
			keys = append(keys, it.(map[string]any)["key"].(string))
		}
		c, _ := p["next_cursor"].(string)
		if c == "" || pages > 5 {
			break
		}
		cursor = c
	}
	if len(keys) != 5 {
		t.Fatalf("paged through %v, want the 5 keys of %s", keys, ns)
	}
	empty := e.get(t, "/v1/keys?namespace=nothing-here").JSON(t)
	if items, ok := empty["items"].([]any); !ok || len(items) != 0 {
		t.Fatalf("empty page must have items: []: %v", empty)
	}
	wantProblem(t, e.get(t, "/v1/keys?state=lost"), 400, "invalid_request")
	wantProblem(t, e.get(t, "/v1/keys?limit=many"), 400, "invalid_request")
	wantProblem(t, e.get(t, "/v1/keys?limit=5000"), 400, "invalid_request")
}

// A token limited to namespaces sees only the breakers of destinations
// named as one of them, no other team's.
func TestDestinationsByScope(t *testing.T) {
	e := start(t, withScopes(), withPolicies(keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		ns: {FailureThreshold: 1}, "billing": {FailureThreshold: 1}}}))
	for _, dest := range []string{ns, "billing"} {
		a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_" + dest, "destination": dest}), "accepted")
		wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_" + dest, "token": a["token"], "reason": "destination_unreachable"}), "destination_failed")
	}
	names := func(token string) []string {
		r := e.callWith(t, http.MethodGet, "/v1/destinations", nil, map[string]string{"Authorization": "Bearer " + token})
		var page struct {
			Items []struct{ Destination string } `json:"items"`
		}
		if r.Status != 200 || json.Unmarshal(r.Body, &page) != nil {
			t.Fatalf("%s", r)
		}
		var out []string
		for _, b := range page.Items {
			out = append(out, b.Destination)
		}
		sort.Strings(out)
		return out
	}
	if got := names(testToken); !slices.Equal(got, []string{"billing", ns}) {
		t.Fatalf("the unscoped token sees %v", got)
	}
	if got := names(scopedTokens[access.RoleRead]); !slices.Equal(got, []string{ns}) {
		t.Fatalf("a token limited to %s sees %v", ns, got)
	}
}

func TestDestinationsEmpty(t *testing.T) {
	e := start(t)
	d := e.get(t, "/v1/destinations")
	if d.Status != http.StatusOK || string(d.Body) != `{"items":[]}` {
		t.Fatalf("destinations: %s", d)
	}
}
