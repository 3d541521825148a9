package n8nsetup

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// addUnguarded puts the webhook → POST workflow in, published, and when
// draft is set with an unpublished edit saved after it (2.x).
func (in *instance) addUnguarded(t *testing.T, draft bool) *n8n.Workflow {
	t.Helper()
	s := unguarded(t, "webhook-post.json")
	pub := "v-pub"
	w := &n8n.Workflow{ID: "WLEAD", Name: s.Name, Nodes: s.Nodes, Connections: s.Connections, Settings: s.Settings, Active: true, VersionID: pub, ActiveVersionID: &pub}
	if draft {
		w.VersionID = "v-draft"
	}
	in.wfs = append(in.wfs, w)
	return w
}

func TestGuardRunPublishesOnlyWhatWasPublished(t *testing.T) {
	for _, c := range []struct {
		name      string
		major     int
		draft     bool
		live      bool
		noteDraft bool
	}{
		{"2.x without unpublished edits goes live with the guard", 2, false, true, false},
		{"2.x with unpublished edits keeps them unpublished, and says so", 2, true, false, true},
		{"1.x stays active", 1, false, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			in, inst := newInstance(t, c.major)
			in.importShipped(t, workflows.ErrorHandlerID)
			in.creds = append(in.creds, Credential{ID: "CRED", Name: workflows.CredentialName, Type: workflows.CredentialType})
			if c.major < 2 {
				workflows.PointCredential(in.wfs[0].Nodes, "CRED", workflows.CredentialName)
			}
			w := in.addUnguarded(t, c.draft)
			o := GuardOptions{WorkflowID: w.ID, Spec: GuardSpec{Node: "Create contact", Key: "$json.body.event_id"}}

			dry := o
			dry.DryRun = true
			rep, err := inst.Guard(ctx, dry)
			if err != nil || rep.Changes() == 0 || in.saves != 0 {
				t.Fatalf("dry run: %v, %d changes, %d saves; want changes listed and nothing saved", err, rep.Changes(), in.saves)
			}
			rep, err = inst.Guard(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if in.saves != 1 || !w.Active {
				t.Fatalf("%d saves, active %v: want one save and the workflow still on", in.saves, w.Active)
			}
			live := w.ActiveVersionID != nil && *w.ActiveVersionID == w.VersionID
			if live != c.live {
				t.Fatalf("published version is the guarded one: %v, want %v", live, c.live)
			}
			notes := fmt.Sprint(rep.Steps)
			if strings.Contains(notes, "unpublished edits") != c.noteDraft {
				t.Fatalf("report %s: a note about unpublished edits %v, want %v", notes, !c.noteDraft, c.noteDraft)
			}
			guardURL, _ := workflows.ConfigValue(in.wfs[0].Nodes, workflows.GuardURL)
			reserve := newGraph(w.Nodes, w.Connections).nodes[guardNames("Create contact")["reserve"]]
			if got := str(params(reserve), "url"); got != fmt.Sprint(guardURL)+"/v1/reserve" {
				t.Fatalf("reserve calls %q, want the address in the installed error handler (%v)", got, guardURL)
			}
			if w.Settings["errorWorkflow"] != workflows.ErrorHandlerID {
				t.Fatalf("errorWorkflow %v, want the guard's handler", w.Settings["errorWorkflow"])
			}
			for _, f := range AuditSnapshot(Snapshot{ID: w.ID, Name: w.Name, Nodes: w.Nodes, Connections: w.Connections, Settings: w.Settings}, errorHandlers(derefAll(in.wfs))) {
				if !f.Guarded {
					t.Fatalf("%s not guarded after the run: %q", f.Node, f.Problems)
				}
			}
			rep, err = inst.Guard(ctx, o)
			if err != nil || rep.Changes() != 0 || in.saves != 1 {
				t.Fatalf("second run: %v, %d changes, %d saves; want nothing", err, rep.Changes(), in.saves)
			}
		})
	}
}

func TestGuardRunNeedsTheGuardsCredential(t *testing.T) {
	in, inst := newInstance(t, 2)
	w := in.addUnguarded(t, false)
	_, err := inst.Guard(context.Background(), GuardOptions{WorkflowID: w.ID, Spec: GuardSpec{Node: "Create contact", Key: "$json.body.event_id", GuardURL: "http://g"}})
	if err == nil || !strings.Contains(err.Error(), "setup --create-credential") || in.saves != 0 {
		t.Fatalf("without the credential: %v, %d saves", err, in.saves)
	}
}

func derefAll(ws []*n8n.Workflow) []n8n.Workflow {
	var out []n8n.Workflow
	for _, w := range ws {
		out = append(out, *w)
	}
	return out
}

// --park on 1.x, where credentials cannot be listed and no workflow uses
// the resume credential yet: with the guard's resume secret, guard makes
// the credential and points the Wait node at it; a second run finds it
// through that Wait node and makes none. Without the secret: refused,
// nothing saved.
func TestGuardRunParkMakesTheResumeCredentialWhereN8nHasNone(t *testing.T) {
	ctx := context.Background()
	in, inst := newInstance(t, 1)
	in.importShipped(t, workflows.ErrorHandlerID)
	in.creds = append(in.creds, Credential{ID: "CRED", Name: workflows.CredentialName, Type: workflows.CredentialType})
	workflows.PointCredential(in.wfs[0].Nodes, "CRED", workflows.CredentialName)
	s := unguarded(t, "schedule-split-post.json")
	w := &n8n.Workflow{ID: "WBATCH", Name: s.Name, Nodes: s.Nodes, Connections: s.Connections, Settings: s.Settings}
	in.wfs = append(in.wfs, w)
	o := GuardOptions{WorkflowID: w.ID, Spec: GuardSpec{Node: "Post order", Key: "'batch-' + $json.id", Park: true}}

	if _, err := inst.Guard(ctx, o); err == nil || !strings.Contains(err.Error(), "N8N_GUARD_RESUME_SECRET") || in.saves != 0 {
		t.Fatalf("--park without the resume secret: %v, %d saves", err, in.saves)
	}
	o.ResumeSecret = "s3cret"
	if _, err := inst.Guard(ctx, o); err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, c := range in.creds {
		if c.Name == workflows.ResumeCredentialName && in.data[c.ID]["value"] == "s3cret" {
			made = append(made, c.ID)
		}
	}
	if len(made) != 1 {
		t.Fatalf("resume credentials made: %v, want one", made)
	}
	if ids := waitCredential(w); len(ids) != 1 || ids[0] != made[0] {
		t.Fatalf("the Wait node checks %v, want [%s]", ids, made[0])
	}
	creds := len(in.creds)
	if rep, err := inst.Guard(ctx, o); err != nil || rep.Changes() != 0 || len(in.creds) != creds {
		t.Fatalf("second run: %v, %d changes, %d credentials more", err, rep.Changes(), len(in.creds)-creds)
	}
}
