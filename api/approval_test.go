package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// invoice is the content of an event that waits for approval.
var invoice = obj{"invoice": "INV-1041", "amount": 1200}

// Approval over HTTP: a gated namespace refuses a reserve without
// resume_url (problem approval_required, nothing written), parks one with
// it (awaiting_approval), and approve/reject decide it; a repeated
// decision is answered as replayed and not counted.
func TestApprovalOverHTTP(t *testing.T) {
	e := start(t, withPolicies(keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		ns: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}))
	p := wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "payload": invoice}), http.StatusConflict, "approval_required")
	if !strings.Contains(p.Detail, "resume_url") {
		t.Fatalf("the refusal does not say what to send: %q", p.Detail)
	}
	wantOK(t, e.get(t, "/v1/lookup?namespace="+ns+"&key=inv_1"), "absent")

	resume := "http://n8n.local:5678/webhook-waiting/4711"
	a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume, "owner": execOwner(resume), "requested_by": "ann@example.com", "payload": invoice}), "parked")
	if a["proceed"] != false || a["awaiting_approval"] != true || a["reason"] != "awaiting_approval" || a["expected_resume_at"] != nil {
		t.Fatalf("awaiting answer: %v", a)
	}
	c := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume + "9", "owner": execOwner(resume + "9")}), "parked")
	if c["awaiting_approval"] != true || c["updated_at"] != a["updated_at"] {
		t.Fatalf("a copy changed the key: %v", c)
	}
	wantProblem(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_1", "by": "ann@example.com"}), http.StatusForbidden, "forbidden")
	wantProblem(t, e.post(t, "/v1/reject", obj{"namespace": ns, "key": "inv_1", "by": "bob"}), http.StatusBadRequest, "invalid_request")
	wantProblem(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_1"}), http.StatusBadRequest, "invalid_request")
	wantProblem(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_9", "by": "bob"}), http.StatusNotFound, "not_found")

	ok := wantOK(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_1", "by": "bob", "note": "amount checked"}), "approved")
	if ok["reason"] != "approved" || ok["resolved_by"] != "bob (via shared token token-1)" || ok["state"] != "parked" {
		t.Fatalf("approved answer: %v", ok)
	}
	again := e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_1", "by": "carl"})
	if b := wantOK(t, again, "approved"); again.Header.Get("Idempotent-Replayed") != "true" || b["resolved_by"] != "bob (via shared token token-1)" {
		t.Fatalf("a replayed approve: %v %v", again.Header, b)
	}
	wantProblem(t, e.post(t, "/v1/reject", obj{"namespace": ns, "key": "inv_1", "by": "carl", "note": "no"}), http.StatusConflict, "conflict")

	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_2", "resume_url": resume + "2", "owner": execOwner(resume + "2"), "fingerprint": "inv_2"}), "parked")
	r := wantOK(t, e.post(t, "/v1/reject", obj{"namespace": ns, "key": "inv_2", "by": "bob", "note": "duplicate invoice"}), "rejected")
	if r["reason"] != "approval_rejected" || r["message"] != "duplicate invoice" || r["retryable"] != false {
		t.Fatalf("rejected answer: %v", r)
	}
	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_2", "resume_url": resume + "2", "owner": execOwner(resume + "2")}), "rejected")

	m := string(e.get(t, "/metrics").Body)
	for _, want := range []string{`n8n_guard_approvals_total{decision="approved"} 1`, `n8n_guard_approvals_total{decision="rejected"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// An approval binds the content: over HTTP a request for approval
// without payload or fingerprint is refused (400 naming the field,
// nothing recorded), and once approved and woken, a reserve with other
// content is refused (422 key_reused) while the approved one writes.
func TestApprovalBindsTheContentOverHTTP(t *testing.T) {
	e := start(t, withPolicies(keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		ns: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}))
	resume := "http://n8n.local:5678/webhook-waiting/4712"
	p := wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume, "owner": execOwner(resume), "requested_by": "ann"}), http.StatusBadRequest, "invalid_request")
	if !hasField(p.Fields, "payload", "required_without=fingerprint") || !strings.Contains(p.Detail, "payload") {
		t.Fatalf("the refusal does not name the field: %+v", p)
	}
	wantOK(t, e.get(t, "/v1/lookup?namespace="+ns+"&key=inv_1"), "absent")

	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume, "owner": execOwner(resume), "requested_by": "ann", "payload": invoice}), "parked")
	wantOK(t, e.post(t, "/v1/approve", obj{"namespace": ns, "key": "inv_1", "by": "bob", "note": "amount checked"}), "approved")
	// The guard resumes the execution (what the approval resumer does).
	if _, ok, err := e.store.ClaimResume(context.Background(), ns, "inv_1", time.Minute); err != nil || !ok {
		t.Fatalf("claim the resume: %v %v", ok, err)
	}
	before := string(e.get(t, "/v1/lookup?namespace="+ns+"&key=inv_1").Body)
	wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume, "owner": execOwner(resume), "payload": obj{"amount": 99999}}), http.StatusUnprocessableEntity, "key_reused")
	p = wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume, "owner": execOwner(resume)}), http.StatusBadRequest, "invalid_request")
	if !hasField(p.Fields, "payload", "required_without=fingerprint") {
		t.Fatalf("fields %+v", p.Fields)
	}
	wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume, "owner": execOwner(resume), "fingerprint": "INV-1041"}), http.StatusUnprocessableEntity, "key_reused")
	if after := string(e.get(t, "/v1/lookup?namespace="+ns+"&key=inv_1").Body); after != before {
		t.Fatalf("a refused reserve changed the key:\n%s\n%s", before, after)
	}
	a := wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "inv_1", "resume_url": resume, "owner": execOwner(resume), "payload": obj{"amount": 1200, "invoice": "INV-1041"}}), "accepted")
	if a["proceed"] != true || a["token"] == "" {
		t.Fatalf("the approved content: %v", a)
	}
}
