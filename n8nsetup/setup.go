package n8nsetup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// Instance is one n8n as setup and check see it.
type Instance struct {
	Client  *n8n.Client
	Version n8n.Version
	// Resolve finds the addresses of the guard's host for check's SSRF
	// warning; nil is the system's resolver.
	Resolve Resolver
}

// Connect finds out which n8n answers and refuses one it cannot serve.
// given is the version the operator says n8n is (--n8n-version), "" for
// none: it stands in for a version n8n did not tell, and must agree with
// one it did.
func Connect(ctx context.Context, c *n8n.Client, given string) (*Instance, error) {
	v, err := c.Version(ctx)
	if err != nil {
		return nil, err
	}
	if given != "" {
		if v, err = withGiven(v, given); err != nil {
			return nil, err
		}
	}
	if err := supported(v); err != nil {
		return nil, err
	}
	if err := c.Ping(ctx); err != nil {
		return nil, err
	}
	return &Instance{Client: c, Version: v}, nil
}

// SetupOptions are what setup was asked to do.
type SetupOptions struct {
	// GuardURL is where n8n reaches the guard, written into the Config node
	// of the installed workflows; empty keeps what an installed one has.
	GuardURL string
	// Token, when set, creates the guard's credential if it is missing.
	Token string
	// ResumeSecret, when set, creates the resume credential (Header Auth
	// X-N8n-Guard-Resume: the guard's resume secret) if it is missing; the
	// Wait nodes of parking workflows are wired to it.
	ResumeSecret string
	// CheckSecret, when set, creates the check credential (Header Auth
	// X-N8n-Guard-Check: the guard's check secret) if it is missing; the
	// Webhook nodes of checks are wired to it, those made before checks
	// had a secret of their own (on the resume credential) too.
	CheckSecret string
	// Examples installs the example workflows (never published).
	Examples bool
	// Scope limits which workflows get the error handler.
	Scope  n8n.Filter
	DryRun bool
}

// session is one setup or check run: what it changes goes into rep.
type session struct {
	*Instance
	dryRun bool
	rep    *Report
}

func (n *session) change(format string, args ...any)  { n.rep.add(Change, format, args...) }
func (n *session) problem(format string, args ...any) { n.rep.add(NotDone, format, args...) }

// Setup wires the instance to the guard, idempotently: the credential, the
// error handler (published on 2.x), the examples if asked, and
// settings.errorWorkflow on every workflow in scope that has none. The
// report holds what was done (or would be, in a dry run) also when an
// error stopped it; its Err says whether anything was not done.
func (inst *Instance) Setup(ctx context.Context, o SetupOptions) (*Report, error) {
	n := &session{Instance: inst, dryRun: o.DryRun, rep: &Report{DryRun: o.DryRun}}
	return n.rep, n.setup(ctx, o)
}

func (n *session) setup(ctx context.Context, o SetupOptions) error {
	all, err := n.Client.Workflows(ctx, n8n.Filter{})
	if err != nil {
		return err
	}
	shipped, err := workflows.Shipped()
	if err != nil {
		return err
	}
	handler := findShipped(all, shipped[0])
	c, err := n.setupCredentials(ctx, all, handler, o)
	if err != nil {
		return err
	}
	handlerID, err := n.installHandler(ctx, handler, shipped[0], c.api, o.GuardURL)
	if err != nil {
		return err
	}
	if o.Examples {
		for _, wf := range shipped[1:] {
			if err := n.installExample(ctx, findShipped(all, wf), wf, c.api, c.resume, c.check, handlerID, o.GuardURL); err != nil {
				return err
			}
		}
	}
	targets, err := n.scoped(ctx, all, o.Scope)
	if err != nil {
		return err
	}
	return n.wireTargets(ctx, targets, c, handlerID)
}

// setupCreds are the guard's credentials in n8n as setup found or made
// them; resume and check keep their placeholder ids when none is needed.
type setupCreds struct {
	api, resume, check guardCredential
	// resumeIDs: the ids of the resume credentials (checks that still
	// check one are moved to the check credential).
	resumeIDs []string
}

// setupCredentials finds or makes the API token credential, and the
// resume and check credentials when a workflow (or an example) needs
// them or their secret is given.
func (n *session) setupCredentials(ctx context.Context, all []n8n.Workflow, handler *n8n.Workflow, o SetupOptions) (setupCreds, error) {
	c := setupCreds{
		resume: guardCredential{workflows.ResumeCredentialID, workflows.ResumeCredentialName},
		check:  guardCredential{workflows.CheckCredentialID, workflows.CheckCredentialName},
	}
	creds, listed, err := n.credentials(ctx)
	if err != nil {
		return c, err
	}
	if !listed {
		n.noteUnlistedCredentials()
	}
	if c.api, err = n.credential(ctx, handler, creds, listed, o.Token); err != nil {
		return c, err
	}
	// With the secret given (--create-credential) the credential is made
	// even before any workflow parks: `n8n guard --park` needs it.
	if o.Examples || parks(all) || o.ResumeSecret != "" {
		if c.resume, err = n.resumeCredential(ctx, all, creds, listed, o.ResumeSecret); err != nil {
			return c, err
		}
	}
	c.resumeIDs = resumeCredentialIDs(creds, c.resume)
	if o.Examples || hasChecks(all, c.resumeIDs) {
		if c.check, err = n.checkCredential(ctx, all, creds, listed, o.CheckSecret); err != nil {
			return c, err
		}
	}
	return c, nil
}

// wireTargets wires the Wait nodes of the workflows in scope to the
// resume credential, their checks to the check credential, and points
// those without an error workflow at the handler.
func (n *session) wireTargets(ctx context.Context, targets []n8n.Workflow, c setupCreds, handlerID string) error {
	if c.resume.ID != workflows.ResumeCredentialID {
		if err := n.eachTarget(targets, func(w n8n.Workflow) bool { return waitsOn(w, c.resume) },
			func(w n8n.Workflow) error { return n.wireResume(ctx, w, c.resume) }); err != nil {
			return err
		}
	}
	if c.check.ID != workflows.CheckCredentialID {
		if err := n.eachTarget(targets, func(w n8n.Workflow) bool { return checksOn(w, c.check, c.resumeIDs) },
			func(w n8n.Workflow) error { return n.wireCheck(ctx, w, c.check, c.resumeIDs) }); err != nil {
			return err
		}
	}
	return n.eachTarget(targets, func(w n8n.Workflow) bool { return !hasErrorTrigger(w) && errorWorkflow(w) == "" },
		func(w n8n.Workflow) error { return n.pointAtHandler(ctx, w, handlerID) })
}

// eachTarget does do on every workflow that is not archived and that
// wants it; n8n's refusal of one (an *n8n.Error) is reported as not done and
// the others go on, any other error stops.
func (n *session) eachTarget(targets []n8n.Workflow, wants func(n8n.Workflow) bool, do func(n8n.Workflow) error) error {
	for _, w := range targets {
		if w.IsArchived || !wants(w) {
			continue
		}
		if err := do(w); err != nil {
			var ne *n8n.Error
			if !errors.As(err, &ne) {
				return err
			}
			n.problem("workflow %s %q: %v", w.ID, w.Name, err)
		}
	}
	return nil
}

// noteUnlistedCredentials says what cannot be checked, once.
func (n *session) noteUnlistedCredentials() {
	if n.Version.Major < 2 {
		n.rep.add(Note, "n8n 1.x cannot list credentials; the credential references of the handler and the Wait nodes are trusted, not checked")
	} else {
		n.rep.add(Note, "the API key lacks the scope credential:list; the credential references of the handler and the Wait nodes are trusted, not checked")
	}
}

// scoped narrows all to the workflows of a tag or project. A scope that
// matches nothing is an error: "all fine" about no workflow would be a lie.
func (n *session) scoped(ctx context.Context, all []n8n.Workflow, scope n8n.Filter) ([]n8n.Workflow, error) {
	if scope == (n8n.Filter{}) {
		return all, nil
	}
	targets, err := n.Client.Workflows(ctx, scope)
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
func (n *session) credential(ctx context.Context, handler *n8n.Workflow, creds []Credential, listed bool, token string) (guardCredential, error) {
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
	c, err := n.createGuardCredential(ctx, token)
	return guardCredential{c.ID, c.Name}, err
}

// resumeCredential finds the credential the Wait nodes check on the
// guard's resume calls, or creates it when the guard's resume secret was
// given. Where credentials cannot be listed (1.x) a Wait node's reference
// to one that is not the shipped placeholder is trusted. n8n's API never
// shows a credential's value, so a secret changed since is not seen here:
// delete the credential in n8n and run setup again.
func (n *session) resumeCredential(ctx context.Context, all []n8n.Workflow, creds []Credential, listed bool, secret string) (guardCredential, error) {
	return n.headerCredential(ctx, headerAuth{
		name: workflows.ResumeCredentialName, placeholder: workflows.ResumeCredentialID, header: workflows.ResumeHeader,
		purpose: "resume", env: "N8N_GUARD_RESUME_SECRET", file: n8n.ResumeSecretFile, checkedBy: "the Wait nodes of parking workflows",
		uses: func(node map[string]any) (string, bool) { return workflows.UsesResumeCredential(node) },
	}, all, creds, listed, secret)
}

// headerAuth is one of the guard's Header Auth credentials in n8n (one per
// purpose): how it is named, its shipped placeholder's id, its header,
// where the guard's secret for it comes from, and which nodes check it.
type headerAuth struct {
	name, placeholder, header     string
	purpose, env, file, checkedBy string
	// uses tells whether a node checks the header, and the id it names.
	uses func(node map[string]any) (string, bool)
}

// headerCredential finds the credential h or creates it when the guard's
// secret for it was given. Where credentials cannot be listed (1.x) a
// node's reference to one that is not a shipped placeholder is trusted.
func (n *session) headerCredential(ctx context.Context, h headerAuth, all []n8n.Workflow, creds []Credential, listed bool, secret string) (guardCredential, error) {
	if listed {
		for _, c := range creds {
			if c.Name == h.name && c.Type == workflows.CredentialType {
				return guardCredential{c.ID, c.Name}, nil
			}
		}
	} else {
		for _, w := range all {
			for _, node := range w.Nodes {
				if id, ok := h.uses(node); ok && id != "" && id != h.placeholder && id != workflows.ResumeCredentialID {
					return guardCredential{id, h.name}, nil
				}
			}
		}
	}
	if secret == "" {
		n.problem("no n8n credential %q (%s): %s check it on the guard's %s calls; rerun with --create-credential and the guard's %s secret (%s or <data>/%s), or create it in n8n (Header Auth: name %s, value the %s secret)",
			h.name, workflows.CredentialType, h.checkedBy, h.purpose, h.purpose, h.env, h.file, h.header, h.purpose)
		return guardCredential{h.placeholder, h.name}, nil
	}
	n.change("create credential %q (Header Auth %s, the guard's %s secret)", h.name, h.header, h.purpose)
	if n.dryRun {
		return guardCredential{"(new)", h.name}, nil
	}
	c, err := n.createHeaderAuth(ctx, h.name, h.header, secret)
	return guardCredential{c.ID, c.Name}, err
}

// parks reports whether any workflow has a Wait node that checks the
// guard's resume calls: only then is the resume credential needed.
func parks(all []n8n.Workflow) bool {
	for _, w := range all {
		for _, node := range w.Nodes {
			if _, ok := workflows.UsesResumeCredential(node); ok && !w.IsArchived {
				return true
			}
		}
	}
	return false
}

// waitsOn reports whether w has a Wait node checking the resume header
// that is not wired to the resume credential c.
func waitsOn(w n8n.Workflow, c guardCredential) bool {
	for _, node := range w.Nodes {
		if id, ok := workflows.UsesResumeCredential(node); ok && id != c.ID {
			return true
		}
	}
	return false
}

// wireResume points w's Wait nodes at the resume credential.
func (n *session) wireResume(ctx context.Context, w n8n.Workflow, c guardCredential) error {
	return n.rewire(ctx, w, "its Wait nodes check the resume credential", "the Wait nodes", c,
		func(nodes []map[string]any) { workflows.PointResumeCredential(nodes, c.ID, c.Name) })
}

// rewire saves w with its nodes pointed at credential c by point; what
// names those nodes. A 2.x workflow whose saved version is the published
// one goes live with the change; one with unpublished edits keeps them
// unpublished, and the user is told (live) that the wiring takes effect
// when they publish.
func (n *session) rewire(ctx context.Context, w n8n.Workflow, live, what string, c guardCredential, point func([]map[string]any)) error {
	var nodes []map[string]any
	b, _ := json.Marshal(w.Nodes)
	_ = json.Unmarshal(b, &nodes)
	point(nodes)
	publish := w.ActiveVersionID != nil && *w.ActiveVersionID != "" && *w.ActiveVersionID == w.VersionID
	if !n.dryRun {
		if err := n.updateWorkflow(ctx, w.ID, WorkflowBody{w.Name, nodes, w.Connections, w.Settings}, publish); err != nil {
			return err
		}
	}
	n.change("wire %s of %s %q to credential %q", what, w.ID, w.Name, c.Name)
	if n.Version.Major >= 2 && w.Published() && !publish {
		n.rep.add(Note, "workflow %s %q has unpublished edits: %s once you publish it", w.ID, w.Name, live)
	}
	return nil
}

// resumeCredentialIDs are n8n's ids of the instance's resume credentials:
// a check's webhook guarded by one of them was made before checks had a
// secret of their own (workflows.IsCheckWebhook).
func resumeCredentialIDs(creds []Credential, resume guardCredential) []string {
	var ids []string
	for _, c := range creds {
		if c.Name == workflows.ResumeCredentialName && c.Type == workflows.CredentialType {
			ids = append(ids, c.ID)
		}
	}
	if resume.ID != workflows.ResumeCredentialID && resume.ID != "(new)" && !slices.Contains(ids, resume.ID) {
		ids = append(ids, resume.ID)
	}
	return ids
}

// checkCredential finds the credential the checks' webhooks check on the
// guard's check calls, or creates it when the guard's check secret was
// given; as resumeCredential does for the Wait nodes.
func (n *session) checkCredential(ctx context.Context, all []n8n.Workflow, creds []Credential, listed bool, secret string) (guardCredential, error) {
	return n.headerCredential(ctx, headerAuth{
		name: workflows.CheckCredentialName, placeholder: workflows.CheckCredentialID, header: workflows.CheckHeader,
		purpose: "check", env: "N8N_GUARD_CHECK_SECRET", file: n8n.CheckSecretFile, checkedBy: "the Webhook nodes of checks",
		uses: func(node map[string]any) (string, bool) { return workflows.CheckCredentialOf(node) },
	}, all, creds, listed, secret)
}

// hasChecks reports whether any workflow has a check's webhook: only then
// is the check credential needed.
func hasChecks(all []n8n.Workflow, resumeIDs []string) bool {
	for _, w := range all {
		if !w.IsArchived && checksOn(w, guardCredential{}, resumeIDs) {
			return true
		}
	}
	return false
}

// checksOn reports whether w has a check's webhook not wired to the check
// credential c.
func checksOn(w n8n.Workflow, c guardCredential, resumeIDs []string) bool {
	for _, node := range w.Nodes {
		if id, ok := workflows.CheckCredentialOf(node, resumeIDs...); ok && id != c.ID {
			return true
		}
	}
	return false
}

// wireCheck points w's check webhooks at the check credential, as
// wireResume does for Wait nodes: a check made before checks had a secret
// of their own leaves the resume credential.
func (n *session) wireCheck(ctx context.Context, w n8n.Workflow, c guardCredential, resumeIDs []string) error {
	return n.rewire(ctx, w, "its check webhook checks the check credential", "the check webhook", c,
		func(nodes []map[string]any) { workflows.PointCheckCredential(nodes, c.ID, c.Name, resumeIDs...) })
}

// findShipped finds an installed copy of a shipped workflow: by its id (a
// CLI import keeps it), else by its name (the public API assigns ids).
func findShipped(all []n8n.Workflow, wf workflows.Workflow) *n8n.Workflow {
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
func desired(wf workflows.Workflow, installed *n8n.Workflow, cred, resume guardCredential, guardURL string) (workflows.Workflow, error) {
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
	workflows.PointResumeCredential(out.Nodes, resume.ID, resume.Name)
	return out, nil
}

// installHandler creates or updates the error handler and puts it live on
// 2.x; it answers the handler's id.
func (n *session) installHandler(ctx context.Context, installed *n8n.Workflow, wf workflows.Workflow, cred guardCredential, guardURL string) (string, error) {
	want, err := desired(wf, installed, cred, guardCredential{}, guardURL)
	if err != nil {
		return "", err
	}
	id := "(new)"
	switch {
	case installed == nil:
		n.change("create workflow %q", want.Name)
		if !n.dryRun {
			created, err := n.createWorkflow(ctx, want)
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
			body := WorkflowBody{want.Name, want.Nodes, want.Connections, installed.Settings}
			if err := n.updateWorkflow(ctx, id, body, true); err != nil {
				return "", err
			}
		}
	default:
		id = installed.ID
	}
	if n.Version.Major < 2 {
		// 1.x runs an error workflow without activation and refuses to
		// activate one that has only an Error Trigger.
		return id, nil
	}
	if installed == nil || !installed.Published() {
		n.change("publish workflow %s %q (2.x runs only published error workflows)", id, want.Name)
		if !n.dryRun {
			if err := n.publish(ctx, id); err != nil {
				return "", err
			}
		}
	}
	return id, nil
}

// installExample creates an example workflow that is not there yet; one
// that is there belongs to the user and is left as it is.
func (n *session) installExample(ctx context.Context, installed *n8n.Workflow, wf workflows.Workflow, cred, resume, check guardCredential, handlerID, guardURL string) error {
	if installed != nil {
		return nil
	}
	want, err := desired(wf, nil, cred, resume, guardURL)
	if err != nil {
		return err
	}
	workflows.PointCheckCredential(want.Nodes, check.ID, check.Name)
	want.Settings["errorWorkflow"] = handlerID
	n.change("create workflow %q (an example: not published)", want.Name)
	if n.dryRun {
		return nil
	}
	_, err = n.createWorkflow(ctx, want)
	return err
}

// pointAtHandler sets settings.errorWorkflow. Settings are not part of a
// 2.x workflow's published version: the save goes live without publishing
// anything (publishIfActive=false), so edits a user has not published stay
// unpublished.
func (n *session) pointAtHandler(ctx context.Context, w n8n.Workflow, handlerID string) error {
	settings := map[string]any{}
	for k, v := range w.Settings {
		settings[k] = v
	}
	settings["errorWorkflow"] = handlerID
	if !n.dryRun {
		if err := n.updateWorkflow(ctx, w.ID, WorkflowBody{w.Name, w.Nodes, w.Connections, settings}, false); err != nil {
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
