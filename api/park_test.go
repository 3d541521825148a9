package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Parking over HTTP: a reserve with resume_url while the destination is
// paused answers parked (200, no error key, when to expect the resume),
// copies answer the same, and the parked key is listed by state.
func TestParkedOverHTTP(t *testing.T) {
	e := start(t, withPolicies(keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, UnreachableThreshold: 1}}}))
	tok := e.accepted(t, "evt_first", obj{"destination": "hubspot"})
	wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_first", "token": tok, "reason": "destination_unreachable"}), "destination_failed")

	resume := "http://n8n.local:5678/webhook-waiting/4711"
	a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "destination": "hubspot", "resume_url": resume, "owner": execOwner(resume)}), "parked")
	if a["proceed"] != false || a["state"] != "parked" || a["resume_url"] != resume || a["parked_at"] == nil || a["token"] != nil {
		t.Fatalf("parked answer: %v", a)
	}
	if a["retry_after_seconds"] != float64(60) || a["expected_resume_at"] == nil {
		t.Fatalf("parked answer without the expected catch-up time: %v", a)
	}
	if _, ok := a["error"]; ok {
		t.Fatalf("a parked answer has a top-level error key: %v", a)
	}
	c := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "destination": "hubspot", "resume_url": resume + "9", "owner": execOwner(resume + "9")}), "parked")
	if c["resume_url"] != resume || c["updated_at"] != a["updated_at"] {
		t.Fatalf("a copy changed the parked key: %v", c)
	}
	// Without resume_url: as before, nothing recorded.
	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_2", "destination": "hubspot"}), "destination_paused")

	page := e.get(t, "/v1/keys?state=parked")
	if page.Status != http.StatusOK {
		t.Fatalf("list: %s", page)
	}
	items := page.JSON(t)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["key"] != "evt_1" {
		t.Fatalf("parked keys: %v", items)
	}
	for _, bad := range []string{"ftp://n8n/x", "webhook-waiting/1", "http://"} {
		wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_3", "destination": "hubspot", "resume_url": bad, "owner": execOwner(bad)}), http.StatusBadRequest, "invalid_request")
	}
	wantOK(t, e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_3"), "absent")
}

// /v1/destinations counts a parked event n8n woke as woken, not parked,
// until its execution reserves again: it is neither waiting for the
// catch-up nor gone.
func TestDestinationsCountWokenEvents(t *testing.T) {
	e := start(t, withPolicies(keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, UnreachableThreshold: 1}}}))
	tok := e.accepted(t, "evt_first", obj{"destination": "hubspot"})
	wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_first", "token": tok, "reason": "destination_unreachable"}), "destination_failed")
	for _, k := range []string{"evt_1", "evt_2"} {
		wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": k, "destination": "hubspot", "resume_url": "http://n8n.local:5678/webhook-waiting/" + k, "owner": execOwner("http://n8n.local:5678/webhook-waiting/" + k)}), "parked")
	}
	counts := func() string {
		t.Helper()
		d := e.get(t, "/v1/destinations").JSON(t)["items"].([]any)[0].(map[string]any)
		return fmt.Sprintf("parked %v woken %v", d["parked"], d["woken"])
	}
	if got := counts(); got != "parked 2 woken 0" {
		t.Fatalf("before the catch-up: %s", got)
	}
	e.clock.Advance(2 * time.Minute)
	ctx := context.Background()
	rec, ok, err := e.store.ClaimResume(ctx, ns, "evt_1", 30*time.Second)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := e.store.ResumeAnswered(ctx, ns, "evt_1", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
		t.Fatal(err)
	}
	if got := counts(); got != "parked 1 woken 1" {
		t.Fatalf("n8n woke evt_1: %s", got)
	}
	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "destination": "hubspot"}), "accepted")
	if got := counts(); got != "parked 1 woken 0" {
		t.Fatalf("the woken execution reserved again: %s", got)
	}
}

// A maintenance window over HTTP: admin only, bad input refused, then
// events park during it.
func TestMaintenanceWindowOverHTTP(t *testing.T) {
	e := start(t)
	until := e.clock.Now().Add(time.Hour).Format(time.RFC3339)
	wantProblem(t, e.post(t, "/v1/destinations/hold", obj{"destination": "hubspot", "by": "ops", "until": until}), http.StatusBadRequest, "invalid_request")
	wantProblem(t, e.post(t, "/v1/destinations/hold", obj{"destination": "hubspot", "by": "ops", "reason": "upgrade", "until": e.clock.Now().Add(-time.Hour).Format(time.RFC3339)}), http.StatusBadRequest, "invalid_request")
	r := e.post(t, "/v1/destinations/hold", obj{"destination": "hubspot", "by": "ops", "reason": "CRM upgrade", "until": until})
	if r.Status != http.StatusOK {
		t.Fatalf("hold: %s", r)
	}
	if b := r.JSON(t); b["state"] != "open" || b["reopens_at"] != until {
		t.Fatalf("breaker: %v", b)
	}
	a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "destination": "hubspot", "resume_url": "http://n8n/webhook-waiting/1", "owner": execOwner("http://n8n/webhook-waiting/1")}), "parked")
	if a["retry_after_seconds"] != float64(3600) {
		t.Fatalf("parked until the window's end: %v", a)
	}
	// The listing shows the window (who, why, until) and the parked count.
	list := e.get(t, "/v1/destinations")
	items := list.JSON(t)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("destinations: %s", list)
	}
	d := items[0].(map[string]any)
	m, _ := d["maintenance"].(map[string]any)
	if d["parked"] != float64(1) || m == nil || m["by"] != "ops (via shared token token-1)" || m["reason"] != "CRM upgrade" || m["until"] != until || m["set_at"] == nil {
		t.Fatalf("destination: %v", d)
	}
	// Ending it: a reason is required; then the window is gone and the
	// destination probes at once.
	wantProblem(t, e.post(t, "/v1/destinations/hold/end", obj{"destination": "hubspot", "by": "ops"}), http.StatusBadRequest, "invalid_request")
	wantProblem(t, e.post(t, "/v1/destinations/hold/end", obj{"destination": "salesforce", "by": "ops", "reason": "x"}), http.StatusNotFound, "not_found")
	if m := e.get(t, "/v1/destinations").JSON(t)["items"].([]any)[0].(map[string]any)["maintenance"]; m == nil {
		t.Fatal("a refused end removed the window")
	}
	r = e.post(t, "/v1/destinations/hold/end", obj{"destination": "hubspot", "by": "ops", "reason": "upgrade done early"})
	if b := r.JSON(t); r.Status != http.StatusOK || b["maintenance"] != nil || b["state"] != "half_open" {
		t.Fatalf("end hold: %s", r)
	}
	wantProblem(t, e.post(t, "/v1/destinations/hold/end", obj{"destination": "hubspot", "by": "ops", "reason": "again"}), http.StatusConflict, "conflict")
}
