package n8nsetup

import (
	"context"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// A check made before checks had a secret of their own checks the resume
// credential. check says so; setup --create-credential creates the check
// credential with the guard's check secret (never the resume secret) and
// moves the check's webhook to it, once.
func TestSetupGivesChecksTheirOwnCredential(t *testing.T) {
	ctx := context.Background()
	in, inst := newInstance(t, 2)
	in.creds = append(in.creds, Credential{ID: "R0", Name: workflows.ResumeCredentialName, Type: workflows.CredentialType})
	in.data["R0"] = map[string]any{"name": workflows.ResumeHeader, "value": "resume-s3cret"}
	in.importShipped(t, workflows.LeadCheckID)
	chk := in.workflow(workflows.LeadCheckID)
	for _, n := range chk.Nodes {
		if workflows.IsCheckWebhook(n) {
			n["credentials"] = map[string]any{workflows.CredentialType: map[string]any{"id": "R0", "name": workflows.ResumeCredentialName}}
		}
	}
	webhookCredential := func() string {
		for _, n := range in.workflow(workflows.LeadCheckID).Nodes {
			if n["type"] == "n8n-nodes-base.webhook" {
				c, _ := n["credentials"].(map[string]any)[workflows.CredentialType].(map[string]any)
				id, _ := c["id"].(string)
				return id
			}
		}
		return ""
	}

	rep, err := inst.Check(ctx, n8n.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !noted(rep, "checks the resume credential") {
		t.Fatalf("check before setup: %+v, want a note that the check's webhook checks the resume credential", rep.Steps)
	}

	rep, err = inst.Setup(ctx, SetupOptions{GuardURL: "http://guard:8080", Token: "tok", ResumeSecret: "resume-s3cret", CheckSecret: "check-s3cret"})
	if err != nil || rep.Err() != nil {
		t.Fatalf("setup: %v %v %+v", err, rep.Err(), rep.Steps)
	}
	var check *Credential
	for i, c := range in.creds {
		if c.Name == workflows.CheckCredentialName {
			check = &in.creds[i]
		}
	}
	if check == nil {
		t.Fatalf("credentials after setup: %+v, want %q", in.creds, workflows.CheckCredentialName)
	}
	if d := in.data[check.ID]; d["name"] != workflows.CheckHeader || d["value"] != "check-s3cret" {
		t.Fatalf("check credential data %v, want header %s with the guard's check secret", d, workflows.CheckHeader)
	}
	if got := webhookCredential(); got != check.ID {
		t.Fatalf("the check's webhook checks %q, want the check credential %s", got, check.ID)
	}
	rep, err = inst.Check(ctx, n8n.Filter{})
	if err != nil || noted(rep, "checks the resume credential") {
		t.Fatalf("check after setup: %v %+v", err, rep.Steps)
	}
	saves, creds := in.saves, len(in.creds)
	if rep, err = inst.Setup(ctx, SetupOptions{GuardURL: "http://guard:8080", Token: "tok", ResumeSecret: "resume-s3cret", CheckSecret: "check-s3cret"}); err != nil || rep.Changes() != 0 ||
		in.saves != saves || len(in.creds) != creds {
		t.Fatalf("a second setup changed something: %v %+v", err, rep.Steps)
	}
}
