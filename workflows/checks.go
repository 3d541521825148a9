package workflows

// Checks (docs/n8n.md, "Checks"): the guard calls a check workflow's
// webhook about an unknown key before it pages a person. The webhook
// accepts only the guard: Header Auth with the guard's resume credential
// (header X-N8n-Guard-Resume), the one the Wait nodes of parked executions
// check too (ResumeCredentialID); it is not the API token credential the
// guard's own nodes use: PointCredential leaves it alone and
// PointResumeCredential wires it with the Wait nodes.
const (
	webhookNodeType = "n8n-nodes-base.webhook"
	// LeadCheckID is the shipped check of the lead example (lead-check.json).
	LeadCheckID = "n8nGuardLeadChk1"
	// LeadCheckPath is its webhook path.
	LeadCheckPath = "n8n-guard/lead-check"
)
