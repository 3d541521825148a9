package n8nsetup

import (
	"context"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// Audit is what `n8n audit` found on an instance.
type Audit struct {
	Findings []Finding `json:"findings"`
	// Workflows counts the workflows read.
	Workflows int `json:"workflows"`
	// Notes say what could not be read.
	Notes []string `json:"notes,omitempty"`
}

// Unguarded counts the findings the guard does not cover; with
// acceptUnclassified the nodes the audit does not know are not counted
// (they are still listed).
func (a *Audit) Unguarded(acceptUnclassified bool) int {
	n := 0
	for _, f := range a.Findings {
		if f.Unguarded() && !(acceptUnclassified && f.Effect == Unclassified) {
			n++
		}
	}
	return n
}

// Audit reads every workflow in scope (on 2.x the published version and,
// when there are unpublished edits, the draft too) and lists each node
// that writes to another system, guarded or not.
func (inst *Instance) Audit(ctx context.Context, scope n8n.Filter) (*Audit, error) {
	all, err := inst.Client.Workflows(ctx, n8n.Filter{})
	if err != nil {
		return nil, err
	}
	n := &session{Instance: inst, rep: &Report{}}
	targets, err := n.scoped(ctx, all, scope)
	if err != nil {
		return nil, err
	}
	handlers := errorHandlers(all)
	a := &Audit{Findings: []Finding{}}
	for _, w := range targets {
		if w.IsArchived || hasErrorTrigger(w) {
			continue
		}
		a.Workflows++
		if hasDraft(w) && w.ActiveVersion == nil {
			// The listing may leave the published version out; one
			// workflow's own answer carries it.
			if one, err := inst.workflow(ctx, w.ID); err == nil {
				w = one
			}
		}
		snaps, note := snapshots(w)
		if note != "" {
			a.Notes = append(a.Notes, note)
		}
		for _, s := range snaps {
			a.Findings = append(a.Findings, AuditSnapshot(s, handlers)...)
		}
	}
	return a, nil
}

// errorHandlers are the guard's error workflows on the instance: the
// shipped handler, by its id (CLI import) or name (setup).
func errorHandlers(all []n8n.Workflow) map[string]bool {
	shipped, err := workflows.Shipped()
	ids := map[string]bool{}
	if err != nil {
		return ids
	}
	for _, w := range all {
		if !w.IsArchived && (w.ID == shipped[0].ID || w.Name == shipped[0].Name) {
			ids[w.ID] = true
		}
	}
	return ids
}

// snapshots are the versions of w that run or will run: on 2.x with
// unpublished edits, the published version and the draft.
func snapshots(w n8n.Workflow) ([]Snapshot, string) {
	draft := Snapshot{ID: w.ID, Name: w.Name, Nodes: w.Nodes, Connections: w.Connections, Settings: w.Settings}
	if !hasDraft(w) {
		return []Snapshot{draft}, ""
	}
	draft.Version = "draft"
	if w.ActiveVersion == nil || w.ActiveVersion.Nodes == nil {
		return []Snapshot{draft}, "workflow " + w.ID + " " + w.Name + ": n8n did not return its published version; only the draft was audited"
	}
	pub := Snapshot{ID: w.ID, Name: w.Name, Version: "published", Nodes: w.ActiveVersion.Nodes, Connections: w.ActiveVersion.Connections, Settings: w.Settings}
	return []Snapshot{pub, draft}, ""
}
