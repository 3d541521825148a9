package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// setupOptions are what `n8n-guard n8n setup` was asked to do.
type setupOptions struct {
	// GuardURL is where n8n reaches the guard, written into the Config node
	// of the installed workflows; empty keeps what an installed one has.
	GuardURL string
	// Token, when set, creates the guard's credential if it is missing.
	Token string
	// Examples installs the example workflows (never published).
	Examples bool
	// Scope limits which workflows get the error handler.
	Scope  workflowFilter
	DryRun bool
}

// n8nInstance is one n8n as setup and check see it.
type n8nInstance struct {
	api     *n8nAPI
	version n8nVersion
	out     io.Writer
	dryRun  bool
	changes int
	// problems are what setup could not do; each is printed and makes the
	// command fail, so nothing is skipped silently.
	problems []string
}

func (n *n8nInstance) change(format string, args ...any) {
	n.changes++
	verb := ""
	if n.dryRun {
		verb = "would "
	}
	fmt.Fprintf(n.out, "  %s%s\n", verb, fmt.Sprintf(format, args...))
}

func (n *n8nInstance) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	n.problems = append(n.problems, msg)
	fmt.Fprintf(n.out, "  NOT DONE: %s\n", msg)
}

// setup wires the instance to the guard, idempotently: the credential, the
// error handler (published on 2.x), the examples if asked, and
// settings.errorWorkflow on every workflow in scope that has none.
func (n *n8nInstance) setup(ctx context.Context, o setupOptions) error {
	all, err := n.api.Workflows(ctx, workflowFilter{})
	if err != nil {
		return err
	}
	shipped, err := workflows.Shipped()
	if err != nil {
		return err
	}
	handler := findShipped(all, shipped[0])

	cred, err := n.credential(ctx, handler, o.Token)
	if err != nil {
		return err
	}
	handlerID, err := n.installHandler(ctx, handler, shipped[0], cred, o.GuardURL)
	if err != nil {
		return err
	}
	if o.Examples {
		for _, wf := range shipped[1:] {
			if err := n.installExample(ctx, findShipped(all, wf), wf, cred, handlerID, o.GuardURL); err != nil {
				return err
			}
		}
	}

	targets, err := n.scoped(ctx, all, o.Scope)
	if err != nil {
		return err
	}
	for _, w := range targets {
		if w.IsArchived || w.HasErrorTrigger() || w.ErrorWorkflow() != "" {
			continue
		}
		if err := n.pointAtHandler(ctx, w, handlerID); err != nil {
			var ne *n8nError
			if !errors.As(err, &ne) {
				return err
			}
			n.problem("workflow %s %q: %v", w.ID, w.Name, err)
		}
	}
	switch {
	case n.changes == 0 && len(n.problems) == 0:
		fmt.Fprintln(n.out, "nothing to change: the instance is wired to n8n-guard")
	case n.dryRun:
		fmt.Fprintf(n.out, "dry run: %d change(s) not made\n", n.changes)
	default:
		fmt.Fprintf(n.out, "%d change(s) made\n", n.changes)
	}
	if len(n.problems) > 0 {
		return fmt.Errorf("%d thing(s) not done, see NOT DONE above", len(n.problems))
	}
	return nil
}

// noteUnlistedCredentials says what cannot be checked, once.
func (n *n8nInstance) noteUnlistedCredentials() {
	if n.version.Major < 2 {
		fmt.Fprintln(n.out, "  note: n8n 1.x cannot list credentials; the handler's credential reference is trusted, not checked")
	} else {
		fmt.Fprintln(n.out, "  note: the API key lacks the scope credential:list; the handler's credential reference is trusted, not checked")
	}
}

// scoped narrows all to the workflows of a tag or project. A scope that
// matches nothing is an error: "all fine" about no workflow would be a lie.
func (n *n8nInstance) scoped(ctx context.Context, all []remoteWorkflow, scope workflowFilter) ([]remoteWorkflow, error) {
	if scope == (workflowFilter{}) {
		return all, nil
	}
	targets, err := n.api.Workflows(ctx, scope)
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		var what []string
		if scope.Tag != "" {
			what = append(what, fmt.Sprintf("tag %q", scope.Tag))
		}
		if scope.ProjectID != "" {
			what = append(what, fmt.Sprintf("project %q", scope.ProjectID))
		}
		return nil, fmt.Errorf("no workflow with %s that this API key can see: a wrong name or id, or a project the key cannot reach",
			strings.Join(what, " and "))
	}
	return targets, nil
}

// guardCredential names the credential the installed workflows use.
type guardCredential struct{ ID, Name string }

// credential finds the guard's credential or creates it when a token was
// given. 1.x cannot list credentials: there the handler's own reference is
// trusted.
func (n *n8nInstance) credential(ctx context.Context, handler *remoteWorkflow, token string) (guardCredential, error) {
	creds, listed, err := n.api.Credentials(ctx, n.version.Major)
	if err != nil {
		return guardCredential{}, err
	}
	if !listed {
		n.noteUnlistedCredentials()
	}
	if listed {
		for _, c := range creds {
			if c.Name == workflows.CredentialName && c.Type == workflows.CredentialType {
				return guardCredential{c.ID, c.Name}, nil
			}
		}
	} else if handler != nil {
		for _, node := range handler.Nodes {
			if id, ok := workflows.UsesCredential(node); ok && id != "" && id != workflows.CredentialID {
				return guardCredential{id, workflows.CredentialName}, nil
			}
		}
	}
	if token == "" {
		n.problem("no n8n credential %q (%s): rerun with --create-credential and the guard's token in N8N_GUARD_TOKEN, or create it in n8n (Header Auth: name Authorization, value Bearer <token>)",
			workflows.CredentialName, workflows.CredentialType)
		return guardCredential{workflows.CredentialID, workflows.CredentialName}, nil
	}
	n.change("create credential %q (Header Auth)", workflows.CredentialName)
	if n.dryRun {
		return guardCredential{"(new)", workflows.CredentialName}, nil
	}
	c, err := n.api.CreateGuardCredential(ctx, token)
	return guardCredential{c.ID, c.Name}, err
}

// findShipped finds an installed copy of a shipped workflow: by its id (a
// CLI import keeps it), else by its name (the public API assigns ids).
func findShipped(all []remoteWorkflow, wf workflows.Workflow) *remoteWorkflow {
	for i := range all {
		if all[i].ID == wf.ID && !all[i].IsArchived {
			return &all[i]
		}
	}
	for i := range all {
		if all[i].Name == wf.Name && !all[i].IsArchived {
			return &all[i]
		}
	}
	return nil
}

// desired is a shipped workflow as it should be on this instance: the
// guard's address (given, else the installed one's) and the credential.
func desired(wf workflows.Workflow, installed *remoteWorkflow, cred guardCredential, guardURL string) (workflows.Workflow, error) {
	var out workflows.Workflow
	b, _ := json.Marshal(wf)
	_ = json.Unmarshal(b, &out) // a deep copy: the shipped value stays as shipped
	if guardURL == "" && installed != nil {
		if v, ok := workflows.ConfigValue(installed.Nodes, workflows.GuardURL); ok {
			guardURL, _ = v.(string)
		}
	}
	if guardURL == "" {
		return out, fmt.Errorf("--guard-url is needed to install %q: the address at which n8n reaches n8n-guard", wf.Name)
	}
	workflows.SetConfig(out.Nodes, workflows.GuardURL, guardURL)
	workflows.PointCredential(out.Nodes, cred.ID, cred.Name)
	return out, nil
}

// installHandler creates or updates the error handler and puts it live on
// 2.x; it answers the handler's id.
func (n *n8nInstance) installHandler(ctx context.Context, installed *remoteWorkflow, wf workflows.Workflow, cred guardCredential, guardURL string) (string, error) {
	want, err := desired(wf, installed, cred, guardURL)
	if err != nil {
		return "", err
	}
	id := "(new)"
	switch {
	case installed == nil:
		n.change("create workflow %q", want.Name)
		if !n.dryRun {
			created, err := n.api.CreateWorkflow(ctx, want)
			if err != nil {
				return "", err
			}
			id = created.ID
		}
	case !sameNodes(installed.Nodes, want.Nodes) || !reflect.DeepEqual(normal(installed.Connections), normal(want.Connections)):
		id = installed.ID
		n.change("update workflow %s %q to the shipped version", id, want.Name)
		if !n.dryRun {
			// The handler is ours: on 2.x its update goes live at once.
			body := workflowBody{want.Name, want.Nodes, want.Connections, installed.Settings}
			if err := n.api.UpdateWorkflow(ctx, id, body, n.version.Major, true); err != nil {
				return "", err
			}
		}
	default:
		id = installed.ID
	}
	if n.version.Major < 2 {
		// 1.x runs an error workflow without activation and refuses to
		// activate one that has only an Error Trigger.
		return id, nil
	}
	if installed == nil || !installed.Published() {
		n.change("publish workflow %s %q (2.x runs only published error workflows)", id, want.Name)
		if !n.dryRun {
			if err := n.api.Publish(ctx, id, n.version.Major); err != nil {
				return "", err
			}
		}
	}
	return id, nil
}

// installExample creates an example workflow that is not there yet; one
// that is there belongs to the user and is left as it is.
func (n *n8nInstance) installExample(ctx context.Context, installed *remoteWorkflow, wf workflows.Workflow, cred guardCredential, handlerID, guardURL string) error {
	if installed != nil {
		return nil
	}
	want, err := desired(wf, nil, cred, guardURL)
	if err != nil {
		return err
	}
	want.Settings["errorWorkflow"] = handlerID
	n.change("create workflow %q (an example: not published)", want.Name)
	if n.dryRun {
		return nil
	}
	_, err = n.api.CreateWorkflow(ctx, want)
	return err
}

// pointAtHandler sets settings.errorWorkflow. Settings are not part of a
// 2.x workflow's published version: the save goes live without publishing
// anything (publishIfActive=false), so edits a user has not published stay
// unpublished.
func (n *n8nInstance) pointAtHandler(ctx context.Context, w remoteWorkflow, handlerID string) error {
	settings := map[string]any{}
	for k, v := range w.Settings {
		settings[k] = v
	}
	settings["errorWorkflow"] = handlerID
	if !n.dryRun {
		if err := n.api.UpdateWorkflow(ctx, w.ID, workflowBody{w.Name, w.Nodes, w.Connections, settings}, n.version.Major, false); err != nil {
			return err
		}
	}
	n.change("set error workflow of %s %q", w.ID, w.Name)
	return nil
}

// sameNodes compares what makes a node behave: n8n adds ids and moves
// nodes around, which changes nothing.
func sameNodes(a, b []map[string]any) bool {
	key := func(nodes []map[string]any) map[string]any {
		m := map[string]any{}
		for _, n := range nodes {
			m[fmt.Sprint(n["name"])] = normal(map[string]any{
				"type": n["type"], "typeVersion": n["typeVersion"], "parameters": n["parameters"],
				"credentials": n["credentials"], "retryOnFail": n["retryOnFail"], "maxTries": n["maxTries"],
				"waitBetweenTries": n["waitBetweenTries"], "onError": n["onError"],
			})
		}
		return m
	}
	return reflect.DeepEqual(key(a), key(b))
}

// normal makes two JSON values comparable whatever Go types decoded them.
func normal(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// silentFailure is one workflow whose failure nobody would hear of.
type silentFailure struct {
	ID, Name, Why string
}

// check lists the workflows in scope that would fail silently: no error
// workflow, one that does not exist or (2.x) is not published, or one whose
// credential is missing.
func (n *n8nInstance) check(ctx context.Context, scope workflowFilter) ([]silentFailure, error) {
	all, err := n.api.Workflows(ctx, workflowFilter{})
	if err != nil {
		return nil, err
	}
	targets, err := n.scoped(ctx, all, scope)
	if err != nil {
		return nil, err
	}
	creds, listed, err := n.api.Credentials(ctx, n.version.Major)
	if err != nil {
		return nil, err
	}
	if !listed {
		n.noteUnlistedCredentials()
	}
	credIDs := map[string]bool{}
	for _, c := range creds {
		credIDs[c.ID] = true
	}
	byID := map[string]remoteWorkflow{}
	for _, w := range all {
		byID[w.ID] = w
	}
	var out []silentFailure
	for _, w := range targets {
		if w.IsArchived || w.HasErrorTrigger() {
			continue
		}
		why := n.whySilent(w, byID, credIDs, listed)
		if why != "" {
			out = append(out, silentFailure{w.ID, w.Name, why})
		}
	}
	return out, nil
}

func (n *n8nInstance) whySilent(w remoteWorkflow, byID map[string]remoteWorkflow, credIDs map[string]bool, listed bool) string {
	id := w.ErrorWorkflow()
	if id == "" {
		return "no error workflow"
	}
	h, ok := byID[id]
	switch {
	case !ok:
		return fmt.Sprintf("its error workflow %s does not exist (or this API key cannot see it)", id)
	case h.IsArchived:
		return fmt.Sprintf("its error workflow %s %q is archived", id, h.Name)
	case n.version.Major >= 2 && !h.Published():
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
