package n8nsetup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// Check lists the workflows in scope that would fail silently (the
// report's Silent): no error workflow, one that does not exist or (2.x) is
// not published, or one whose credential is missing; and workflows that
// park events in a Wait node whose resume credential is missing or not
// the guard's (its resume calls would be refused: parked events would
// never be caught up).
func (inst *Instance) Check(ctx context.Context, scope n8n.Filter) (*Report, error) {
	n := &session{Instance: inst, rep: &Report{}}
	all, err := n.Client.Workflows(ctx, n8n.Filter{})
	if err != nil {
		return n.rep, err
	}
	targets, err := n.scoped(ctx, all, scope)
	if err != nil {
		return n.rep, err
	}
	creds, listed, err := n.credentials(ctx)
	if err != nil {
		return n.rep, err
	}
	if !listed {
		n.noteUnlistedCredentials()
	}
	credIDs := map[string]bool{}
	credNames := map[string]string{}
	for _, c := range creds {
		credIDs[c.ID] = true
		credNames[c.ID] = c.Name
	}
	byID := map[string]n8n.Workflow{}
	for _, w := range all {
		byID[w.ID] = w
	}
	resumeIDs := resumeCredentialIDs(creds, guardCredential{})
	for _, w := range targets {
		if w.IsArchived {
			continue
		}
		if why := whyNotResumable(w, credNames, listed); why != "" {
			n.rep.Silent = append(n.rep.Silent, Silent{w.ID, w.Name, why})
		}
		if why := whyCheckOnResume(w, resumeIDs); why != "" {
			n.rep.add(Note, "workflow %s %q: %s", w.ID, w.Name, why)
		}
		if why, err := n.whyOff(ctx, w); err != nil {
			return n.rep, err
		} else if why != "" {
			n.rep.Silent = append(n.rep.Silent, Silent{w.ID, w.Name, why})
		}
		if hasErrorTrigger(w) {
			continue
		}
		if why := whySilent(n.Version.Major, w, byID, credIDs, listed); why != "" {
			n.rep.Silent = append(n.rep.Silent, Silent{w.ID, w.Name, why})
		}
	}
	return n.rep, n.checkSSRF(ctx, all)
}

// whySilent says why a failure of w would go unheard, or "" when it would
// be heard.
func whySilent(major int, w n8n.Workflow, byID map[string]n8n.Workflow, credIDs map[string]bool, listed bool) string {
	id := errorWorkflow(w)
	if id == "" {
		return "no error workflow"
	}
	h, ok := byID[id]
	switch {
	case !ok:
		return fmt.Sprintf("its error workflow %s does not exist (or this API key cannot see it)", id)
	case h.IsArchived:
		return fmt.Sprintf("its error workflow %s %q is archived", id, h.Name)
	case major >= 2 && !h.Published():
		return fmt.Sprintf("its error workflow %s %q is not published: n8n 2.x does not run it", id, h.Name)
	}
	if listed {
		for _, node := range h.Nodes {
			if cid, ok := workflows.UsesCredential(node); ok && !credIDs[cid] {
				return fmt.Sprintf("its error workflow %s %q uses credential %s, which does not exist", id, h.Name, cid)
			}
		}
	}
	return ""
}

// whyNotResumable says why the guard's resume calls to w's Wait nodes
// would be refused, or "" when they would be let in (or w parks nothing).
// n8n's API never shows a credential's value: a resume credential whose
// secret differs from the guard's is not seen here (the guard logs the
// refusals and keeps trying).
func whyNotResumable(w n8n.Workflow, credNames map[string]string, listed bool) string {
	for _, node := range w.Nodes {
		id, ok := workflows.UsesResumeCredential(node)
		if !ok {
			continue
		}
		name, exists := credNames[id]
		switch {
		case id == workflows.ResumeCredentialID && (!listed || !exists):
			return fmt.Sprintf("its Wait node %q checks the shipped placeholder credential %s: the guard's resume calls would be refused and parked events never caught up (`n8n-guard n8n setup --create-credential` creates %q and wires it)",
				node["name"], id, workflows.ResumeCredentialName)
		case listed && !exists:
			return fmt.Sprintf("its Wait node %q checks credential %s, which does not exist: the guard's resume calls would be refused and parked events never caught up",
				node["name"], id)
		case listed && name != workflows.ResumeCredentialName:
			return fmt.Sprintf("its Wait node %q checks credential %q, not %q (header %s: the guard's resume secret): the guard's resume calls would be refused",
				node["name"], name, workflows.ResumeCredentialName, workflows.ResumeHeader)
		}
	}
	return ""
}

// whyCheckOnResume says why w's check webhook refuses the guard's check
// calls: it checks the resume credential, as checks did before they had a
// secret of their own. The guard pages the person instead (nothing goes
// unheard), and the webhook holds the secret that wakes every parked
// execution; "" when w has no such check.
func whyCheckOnResume(w n8n.Workflow, resumeIDs []string) string {
	for _, node := range w.Nodes {
		id, ok := workflows.CheckCredentialOf(node, resumeIDs...)
		if !ok || id == workflows.CheckCredentialID || !(id == workflows.ResumeCredentialID || slices.Contains(resumeIDs, id)) {
			continue
		}
		return fmt.Sprintf("its check webhook %q checks the resume credential: the guard's check calls carry the check secret (header %s) and are refused, so the person is paged without the check; `n8n-guard n8n setup --create-credential` creates %q and wires it",
			node["name"], workflows.CheckHeader, workflows.CheckCredentialName)
	}
	return ""
}

// whyOff says why w, which holds a guarded write, writes nothing: it is
// off (1.x: not active, 2.x and 3.x: not published) although n8n ran it
// on its triggers before. n8n turns a workflow off after repeated crashed
// executions without running its error workflow (n8n issues #37186,
// #37473), so nothing reaches the guard and the write simply stops. A
// guarded workflow never published (an example setup installed) is noted,
// not silent. "" when w runs or holds no guarded write.
func (n *session) whyOff(ctx context.Context, w n8n.Workflow) (string, error) {
	writes := w.GuardedWrites()
	if len(writes) == 0 || w.Published() {
		return "", nil
	}
	off := "not active"
	if n.Version.Major >= 2 {
		off = "not published"
	}
	ran, err := n.Client.ProductionRuns(ctx, w.ID)
	var ne *n8n.Error
	if errors.As(err, &ne) && (ne.Status == http.StatusForbidden || ne.Status == http.StatusNotFound) {
		n.rep.add(Note, "workflow %s %q holds a guarded write (%q) and is %s; whether n8n ran it before cannot be read (the API key lacks execution:list)", w.ID, w.Name, writes[0], off)
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !ran {
		n.rep.add(Note, "workflow %s %q holds a guarded write (%q) and was never run on its triggers: it is %s", w.ID, w.Name, writes[0], off)
		return "", nil
	}
	return fmt.Sprintf("it holds a guarded write (%q) and is %s although it ran on its triggers before: n8n turns a workflow off after repeated crashed executions without calling its error workflow, so its writes stop unheard; open its last executions in n8n, fix the crash, and %s it again",
		writes[0], off, map[bool]string{true: "publish", false: "activate"}[n.Version.Major >= 2]), nil
}
