package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// execOwner is the owner the shipped workflows send for the execution a
// resume URL wakes: "n8n exec <the id in its path>".
func execOwner(resumeURL string) string {
	path, _, _ := strings.Cut(resumeURL, "?")
	_, rest, ok := strings.Cut(path, "/webhook-waiting/")
	if !ok {
		return "n8n exec 1" // not a resume URL: refused for that
	}
	id, _, _ := strings.Cut(rest, "/")
	return "n8n exec " + id
}

// A caller holding a reserve token names another execution's resume URL
// (the payments workflow's execution 421, waiting on the same n8n): on
// n8n 1.x the guard's resume call, with the resume secret, would wake it
// early. A resume URL is the reserving execution's own, as the reserve
// names it (request_id "<execution id>:…", owner "n8n … exec <id>"), and
// on a fail the execution holding the key's lease; anything else is 400
// invalid_request, rule resume_execution, and nothing is recorded. n8n
// 2.x's signed URLs carry the id in the path the same way.
func TestAResumeURLOfAnotherExecutionIsRefused(t *testing.T) {
	e := start(t, withScopes(), withPolicies(keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, UnreachableThreshold: 1}}}))
	as := func(path string, body obj) *resp {
		return e.callWith(t, http.MethodPost, path, body, map[string]string{"Authorization": "Bearer " + scopedTokens[access.RoleReserve]})
	}
	r := wantOK(t, as("/v1/reserve", obj{"namespace": ns, "key": "evt_open", "destination": "crm"}), "accepted")
	wantOK(t, as("/v1/fail", obj{"namespace": ns, "key": "evt_open", "token": r["token"], "reason": "destination_unreachable"}), "destination_failed")

	const n8n = "http://n8n.local:5678/webhook-waiting/"
	refused := func(t *testing.T, path string, body obj, key string) {
		t.Helper()
		p := wantProblem(t, as(path, body), http.StatusBadRequest, "invalid_request")
		if len(p.Fields) != 1 || p.Fields[0].Field != "resume_url" || p.Fields[0].Rule != "resume_execution" {
			t.Fatalf("fields %+v, want resume_url rule resume_execution (%s)", p.Fields, p.Detail)
		}
		if got := e.get(t, "/v1/lookup?namespace="+ns+"&key="+key).JSON(t); got["state"] == "parked" {
			t.Fatalf("the refused call parked the key: %v", got)
		}
	}
	for _, c := range []struct {
		name     string
		body     obj
		accepted bool
	}{
		{"another execution, as the workflows name themselves", obj{"owner": "n8n wf7 exec 41", "request_id": "41:node:0:0", "resume_url": n8n + "421"}, false},
		{"another execution, the node's owner", obj{"owner": "n8n execution 41", "request_id": "41:N8n Guard:0:0", "resume_url": n8n + "421"}, false},
		{"another execution, request_id alone", obj{"request_id": "41:node:0:0", "resume_url": n8n + "421"}, false},
		{"another execution, owner alone", obj{"owner": "n8n exec 41", "resume_url": n8n + "421"}, false},
		{"request_id and owner disagree", obj{"owner": "n8n exec 421", "request_id": "41:node:0:0", "resume_url": n8n + "421"}, false},
		{"no execution named", obj{"owner": "someone", "resume_url": n8n + "421"}, false},
		{"an id that begins with its own", obj{"request_id": "42:node:0:0", "resume_url": n8n + "421"}, false},
		{"2.x: another execution's signed URL", obj{"request_id": "41:node:0:0", "resume_url": n8n + "421?signature=abc"}, false},
		{"an encoded slash", obj{"request_id": "41:node:0:0", "resume_url": n8n + "41%2F421"}, false},
		{"its own", obj{"owner": "n8n wf7 exec 41", "request_id": "41:node:0:0", "resume_url": n8n + "41"}, true},
		{"its own, the node's owner", obj{"owner": "n8n execution 43", "request_id": "43:N8n Guard:0:0", "resume_url": n8n + "43"}, true},
		{"its own, with the Wait node's suffix", obj{"request_id": "44:node:0:0", "resume_url": n8n + "44/after-crm"}, true},
		{"2.x: its own signed URL", obj{"request_id": "45:node:0:0", "resume_url": n8n + "45?signature=abc"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "evt_" + strings.NewReplacer(" ", "_", ",", "", ":", "", "'", "").Replace(c.name)
			body := obj{"namespace": ns, "key": key, "destination": "crm"}
			for k, v := range c.body {
				body[k] = v
			}
			if c.accepted {
				if a := wantOK(t, as("/v1/reserve", body), "parked"); a["resume_url"] != c.body["resume_url"] {
					t.Fatalf("parked with %v", a["resume_url"])
				}
				return
			}
			refused(t, "/v1/reserve", body, key)
		})
	}

	// A fail parks with the resume URL of the execution holding the key:
	// another's is refused, the key stays reserved; its own parks it.
	e2 := start(t, withScopes(), withPolicies(keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm-a": {Cooldown: time.Hour, UnreachableThreshold: 1}, "crm-b": {Cooldown: time.Hour, UnreachableThreshold: 1}}}))
	as = func(path string, body obj) *resp {
		return e2.callWith(t, http.MethodPost, path, body, map[string]string{"Authorization": "Bearer " + scopedTokens[access.RoleReserve]})
	}
	e = e2
	for _, c := range []struct{ owner, request, dest string }{{"n8n wf7 exec 51", "51:node:0:0", "crm-a"}, {"a person", "", "crm-b"}} {
		key := "evt_fail_" + strings.ReplaceAll(c.owner, " ", "_")
		r := wantOK(t, as("/v1/reserve", obj{"namespace": ns, "key": key, "destination": c.dest, "owner": c.owner, "request_id": c.request}), "accepted")
		refused(t, "/v1/fail", obj{"namespace": ns, "key": key, "token": r["token"], "reason": "destination_unreachable", "resume_url": n8n + "421"}, key)
		if got := wantOK(t, e2.get(t, "/v1/lookup?namespace="+ns+"&key="+key), "found"); got["state"] != "reserved" {
			t.Fatalf("the refused fail changed the key: %v", got)
		}
		if c.request == "" {
			continue // a key whose holder names no execution parks through no fail
		}
		wantOK(t, as("/v1/fail", obj{"namespace": ns, "key": key, "token": r["token"], "reason": "destination_unreachable", "resume_url": n8n + "51"}), "parked")
	}
}
