package n8nsetup

import (
	"context"
	"fmt"

	"github.com/n8n-guard/n8n-guard/n8n"
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
	// Use picks the nodes placed: UseAuto (""), UseCommunity, UseHTTP.
	Use Use
	// Token, when set, creates the community node's credential where n8n
	// has none that can be found.
	Token string
}

// Guard rewrites one workflow through n8n's API so that a node is guarded
// (PlanGuard), with the community node when n8n has it (communityNodeType)
// or the HTTP templates. It never unpublishes: a 2.x workflow whose saved version is
// the published one goes live with the change; one with unpublished edits
// is saved as a draft and left for its owner to publish, which the report
// says; 1.x re-activates an active workflow on save.
func (inst *Instance) Guard(ctx context.Context, o GuardOptions) (*Report, error) {
	n := &session{Instance: inst, dryRun: o.DryRun, rep: &Report{DryRun: o.DryRun}}
	return n.rep, n.guard(ctx, o)
}

func (n *session) guard(ctx context.Context, o GuardOptions) error {
	all, err := n.Client.Workflows(ctx, n8n.Filter{})
	if err != nil {
		return err
	}
	w, err := n.workflow(ctx, o.WorkflowID)
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
	creds, listed, err := n.credentials(ctx)
	if err != nil {
		return err
	}
	// Rewritten before: only the error workflow may change, whichever
	// nodes guard it; nothing is detected or created.
	if !guardedBefore(w, spec.Node) {
		if err := n.guardNodes(ctx, o, &spec, all, handler, creds, listed); err != nil {
			return err
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
	publish := w.Published() && !hasDraft(w)
	if !n.dryRun {
		if err := n.updateWorkflow(ctx, w.ID, WorkflowBody{w.Name, rw.Nodes, rw.Connections, rw.Settings}, publish); err != nil {
			return err
		}
	}
	switch {
	case n.Version.Major >= 2 && hasDraft(w):
		n.rep.add(Note, "workflow %s %q has unpublished edits: the guard is saved with them and takes effect when you publish it", w.ID, w.Name)
	case !w.Published():
		n.rep.add(Note, "workflow %s %q is not published: the guard takes effect when you publish it", w.ID, w.Name)
	}
	return nil
}

// guardedBefore: guard placed its reserve in front of node before (with
// either kind of nodes).
func guardedBefore(w n8n.Workflow, node string) bool {
	name := guardNames(node)["reserve"]
	for _, n := range w.Nodes {
		if n["name"] == name {
			return true
		}
	}
	return false
}

// guardNodes decides which nodes guard places (communityNodeType) and
// finds their credentials: the community node's, or the HTTP templates'
// "n8n-guard API token"; with Park the Wait node's.
func (n *session) guardNodes(ctx context.Context, o GuardOptions, spec *GuardSpec, all []n8n.Workflow, handler *n8n.Workflow, creds []Credential, listed bool) error {
	var err error
	if spec.NodeType, err = n.communityNodeType(ctx, all, o.Use, spec.Park); err != nil {
		return err
	}
	if spec.NodeType != "" {
		if spec.Credential, err = n.communityCredential(ctx, all, creds, listed, o.Token, spec.GuardURL); err != nil {
			return err
		}
		if n.rep.count(NotDone) > 0 {
			return fmt.Errorf("no credential of type %s for the community node", CommunityCredentialType)
		}
	} else {
		if spec.Credential, err = n.credential(ctx, handler, creds, listed, ""); err != nil {
			return err
		}
		if spec.Credential.ID == workflows.CredentialID && n.rep.count(NotDone) > 0 {
			return fmt.Errorf("no credential %q to call n8n-guard with: run `n8n-guard n8n setup --create-credential` first", workflows.CredentialName)
		}
	}
	if spec.Park {
		if spec.Resume, err = n.resumeCredential(ctx, all, creds, listed, o.ResumeSecret); err != nil {
			return err
		}
		if n.rep.count(NotDone) > 0 {
			return fmt.Errorf("--park needs the credential %q: give the guard's resume secret (N8N_GUARD_RESUME_SECRET, --data or --store) or run `n8n-guard n8n setup --create-credential` first", workflows.ResumeCredentialName)
		}
	}
	return nil
}
