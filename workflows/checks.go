package workflows

import "slices"

// Checks (docs/n8n.md, "Checks"): the guard calls a check workflow's
// webhook about an unknown key before it pages a person. The webhook
// accepts only the guard: Header Auth with the guard's check credential
// (CheckCredentialID, header X-N8n-Guard-Check, the check secret). Checks
// made before they had a secret of their own check the resume credential;
// setup moves them to the check credential (PointCheckCredential), so the
// resume secret, which wakes every parked execution, is no check's.
const (
	webhookNodeType = "n8n-nodes-base.webhook"
	// LeadCheckID is the shipped check of the lead example (lead-check.json).
	LeadCheckID = "n8nGuardLeadChk1"
	// LeadCheckPath is its webhook path.
	LeadCheckPath = "n8n-guard/lead-check"
)

// IsCheckWebhook tells whether node is a check's Webhook node: Header Auth
// with the check credential's placeholder id, or with a resume credential
// (the shipped placeholder, or one of resumeIDs: n8n's ids of the
// instance's resume credential), as checks were guarded before they had a
// secret of their own. A webhook guarded by any other credential is
// not the guard's.
func IsCheckWebhook(node map[string]any, resumeIDs ...string) bool {
	p, _ := node["parameters"].(map[string]any)
	if node["type"] != webhookNodeType || p["authentication"] != "headerAuth" {
		return false
	}
	id, ok := headerAuth(node)
	return ok && (id == CheckCredentialID || id == ResumeCredentialID || slices.Contains(resumeIDs, id))
}

// CheckCredentialOf is the credential id a check's Webhook node checks;
// ok is false for any other node.
func CheckCredentialOf(node map[string]any, resumeIDs ...string) (id string, ok bool) {
	if !IsCheckWebhook(node, resumeIDs...) {
		return "", false
	}
	return headerAuth(node)
}
