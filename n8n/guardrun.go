package n8n

import (
	"context"
	"fmt"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// GuardOptions are what `n8n guard` was asked to do.
type GuardOptions struct {
	WorkflowID string
	Spec       GuardSpec
	DryRun     bool
	// ResumeSecret, when set, creates the resume credential for --park
	// where n8n has none that can be found (on 1.x credentials cannot be
	// listed: one no workflow uses yet is not found).
	ResumeSecret string
}

// Guard rewrites one workflow through n8n's API so that a node is guarded
// (PlanGuard). It never unpublishes: a 2.x workflow whose saved version is
// the published one goes live with the change; one with unpublished edits
// is saved as a draft and left for its owner to publish, which the report
// says; 1.x re-activates an active workflow on save.
func (inst *Instance) Guard(ctx context.Context, o GuardOptions) (*Report, error) {
	n := &session{Instance: inst, dryRun: o.DryRun, rep: &Report{DryRun: o.DryRun}}
	return n.rep, n.guard(ctx, o)
}

func (n *session) guard(ctx context.Context, o GuardOptions) error {
	all, err := n.Client.Workflows(ctx, Filter{})
	if err != nil {
		return err
	}
	w, err := n.Client.Workflow(ctx, o.WorkflowID)
	if err != nil {
		return err
	}
	shipped, err := workflows.Shipped()
	if err != nil {
		return err
	}
	handler := findShipped(all, shipped[0])
	spec := o.Spec
	if handler != nil {
		spec.ErrorHandler = handler.ID
		if spec.GuardURL == "" {
			if v, ok := workflows.ConfigValue(handler.Nodes, workflows.GuardURL); ok {
				spec.GuardURL, _ = v.(string)
			}
		}
	} else {
		n.rep.add(Note, "n8n-guard's error handler is not installed: run `n8n-guard n8n setup` so that failures reach their owner")
	}
	creds, listed, err := n.Client.Credentials(ctx, n.Version.Major)
	if err != nil {
		return err
	}
	if spec.Credential, err = n.credential(ctx, handler, creds, listed, ""); err != nil {
		return err
	}
	if spec.Credential.ID == workflows.CredentialID && n.rep.count(NotDone) > 0 {
		return fmt.Errorf("no credential %q to call n8n-guard with: run `n8n-guard n8n setup --create-credential` first", workflows.CredentialName)
	}
	if spec.Park {
		if spec.Resume, err = n.resumeCredential(ctx, all, creds, listed, o.ResumeSecret); err != nil {
			return err
		}
		if n.rep.count(NotDone) > 0 {
			return fmt.Errorf("--park needs the credential %q: give the guard's resume secret (N8N_GUARD_RESUME_SECRET, --data or --store) or run `n8n-guard n8n setup --create-credential` first", workflows.ResumeCredentialName)
		}
	}
	rw, err := PlanGuard(Snapshot{ID: w.ID, Name: w.Name, Nodes: w.Nodes, Connections: w.Connections, Settings: w.Settings}, spec, errorHandlers(all))
	if err != nil {
		return err
	}
	for _, c := range rw.Changes {
		n.change("%s (workflow %s %q)", c, w.ID, w.Name)
	}
	if len(rw.Changes) == 0 {
		return nil
	}
	publish := w.Published() && !w.Draft()
	if !n.dryRun {
		if err := n.Client.UpdateWorkflow(ctx, w.ID, WorkflowBody{w.Name, rw.Nodes, rw.Connections, rw.Settings}, n.Version.Major, publish); err != nil {
			return err
		}
	}
	switch {
	case n.Version.Major >= 2 && w.Draft():
		n.rep.add(Note, "workflow %s %q has unpublished edits: the guard is saved with them and takes effect when you publish it", w.ID, w.Name)
	case !w.Published():
		n.rep.add(Note, "workflow %s %q is not published: the guard takes effect when you publish it", w.ID, w.Name)
	}
	return nil
}
