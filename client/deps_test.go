package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The Go client is what a program links to call the guard: it must not
// link the server's HTTP framework with it. The shared bodies live in
// api/wire for that reason.
func TestClientDoesNotLinkTheServer(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the dependencies with")
	}
	out, err := exec.Command(gotool, "list", "-deps", "github.com/n8n-guard/n8n-guard/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, server := range []string{"github.com/gofiber/", "github.com/n8n-guard/n8n-guard/api/console", "github.com/valyala/fasthttp"} {
			if strings.HasPrefix(dep, server) {
				t.Errorf("package client depends on %s: move the type it borrows into a package without the server (api/wire)", dep)
			}
		}
	}
}
