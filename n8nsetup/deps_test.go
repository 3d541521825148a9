package n8nsetup_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/n8n-guard/n8n-guard/"

// importersOf lists the packages among pkgs and everything they link
// (go list -deps, tests left out) that import target themselves.
func importersOf(t *testing.T, target string, pkgs ...string) []string {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the dependencies with")
	}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, pkgs...)
	out, err := exec.Command(gotool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var importers []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 1 && slices.Contains(f[1:], target) {
			importers = append(importers, f[0])
		}
	}
	return importers
}

// The rewriter runs from the CLI only (`n8n-guard n8n setup|check|audit|
// guard`): a package of the running guard that imported it, even through
// another, would link the workflow rewriter and the shipped templates into
// every serving guard, and make the two n8n adapters one again.
func TestNoRuntimePackageImportsTheRewriter(t *testing.T) {
	serving := []string{"catchup", "rerun", "reconcile", "notify/...", "keystore/...", "api/...", "slack/...", "n8n"}
	for i, p := range serving {
		serving[i] = module + p
	}
	for _, p := range importersOf(t, module+"n8nsetup", serving...) {
		t.Errorf("%s imports n8nsetup, which only cmd/n8n-guard may: move what it uses into the runtime adapter (n8n)", p)
	}
}

// The runtime adapter speaks to a running n8n (resume, check and retry
// calls, execution reads, the off-watch); installing the shipped
// workflows and templates is the rewriter's. Neither it nor anything it
// links imports them.
func TestTheRuntimeAdapterLinksNoTemplates(t *testing.T) {
	for _, p := range importersOf(t, module+"workflows", module+"n8n") {
		t.Errorf("%s imports workflows (the shipped templates) and n8n links it: the runtime adapter must not", p)
	}
}
