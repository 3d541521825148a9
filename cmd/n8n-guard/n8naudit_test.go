package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8nsetup"
)

func TestAuditTableNamesEachUnguardedNodeAndItsFix(t *testing.T) {
	a := &n8nsetup.Audit{Workflows: 2, Findings: []n8nsetup.Finding{
		{WorkflowID: "W1", Workflow: "Lead sync", Node: "Create contact", Type: "n8n-nodes-base.httpRequest",
			Classification: n8nsetup.Classification{Effect: n8nsetup.Write, Operation: "POST"},
			Problems:       []string{"no reserve of n8n-guard on the path from Webhook to it"},
			Fix:            "n8n-guard n8n guard --workflow W1 --node 'Create contact' --key '<expression of the event id, e.g. $json.body.id>'"},
		{WorkflowID: "W2", Workflow: "Orders", Version: "published", Node: "Post order", Type: "n8n-nodes-base.httpRequest",
			Classification: n8nsetup.Classification{Effect: n8nsetup.Write, Operation: "POST"}, Guarded: true},
	}}
	var out bytes.Buffer
	printAudit(&out, a)
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{
		"WORKFLOW", "W1 Lead sync", "Create contact", "httpRequest", "POST", "NO",
		"W2 Orders", "published", "yes",
		"no reserve of n8n-guard on the path from Webhook to it",
		"fix: n8n-guard n8n guard --workflow W1 --node 'Create contact'",
		"2 workflow(s) read, 2 node(s) listed, 1 unguarded",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if strings.Contains(s, "Post order\":") {
		t.Error("a guarded node got a fix")
	}
}
