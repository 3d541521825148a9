package problem_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
)

// The status every code must have. The loop below runs over the code
// lists, not over this map: a code without a status here, or whose status
// the table lacks (answering 500), fails.
var wantStatus = map[errs.Code]int{
	errs.InvalidRequest: 400, errs.InvalidKey: 400, problem.Unauthorized: 401, errs.Forbidden: 403,
	errs.NotFound: 404, problem.RouteNotFound: 404, problem.RequestTimeout: 408,
	errs.StaleToken: 409, errs.Conflict: 409, errs.ApprovalRequired: 409, errs.RerunNotGranted: 409, errs.ParkedWaiting: 409, problem.PayloadTooLarge: 413, errs.KeyReused: 422,
	errs.Internal: 500, errs.Unsupported: 501,
	errs.StoreUnavailable: 503, errs.StoreOutcomeUnknown: 503, problem.Overloaded: 503,
	errs.RecordDamaged: 500, problem.RateLimited: 429,
}

func TestStatusOfEveryCode(t *testing.T) {
	for _, code := range problem.Codes() {
		want, ok := wantStatus[code]
		if !ok {
			t.Errorf("code %s has no expected status in this test: add it", code)
			continue
		}
		if got := problem.Status(code); got != want {
			t.Errorf("Status(%s) = %d, want %d", code, got, want)
		}
		if problem.Title(code) == "" || (code != errs.Internal && problem.Title(code) == problem.Title(errs.Code("something_new"))) {
			t.Errorf("no title of its own for %s", code)
		}
	}
	if got := problem.Status("something_new"); got != 500 {
		t.Errorf("an unknown code answers %d, want 500", got)
	}
}

// Every constant of type Code in errs and problem is in the code lists,
// so the status test above reaches it.
func TestCodeListsAreComplete(t *testing.T) {
	listed := problem.Codes()
	for _, dir := range []string{"../../errs", "."} {
		for name, value := range codeConstants(t, dir) {
			if !slices.Contains(listed, errs.Code(value)) {
				t.Errorf("%s (%q) in %s is in neither errs.Codes nor problem.TransportCodes", name, value, dir)
			}
		}
	}
}

// Every code has its section in docs/api.md, the anchor of its type URI.
func TestEveryCodeIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range problem.Codes() {
		if !regexp.MustCompile(`(?m)^### ` + string(code) + `$`).Match(doc) {
			t.Errorf("docs/api.md has no section ### %s", code)
		}
	}
}

// docs/openapi.yaml's enum of codes is exactly the code lists.
func TestOpenAPIEnumsEveryCode(t *testing.T) {
	doc, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`enum: \[(invalid_request, [^\]]*)\]`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/openapi.yaml has no enum of the codes")
	}
	var documented []errs.Code
	for _, c := range strings.Split(string(m[1]), ",") {
		documented = append(documented, errs.Code(strings.TrimSpace(c)))
	}
	want := problem.Codes()
	slices.Sort(documented)
	slices.Sort(want)
	if !slices.Equal(documented, want) {
		t.Errorf("docs/openapi.yaml enumerates %v, the code lists are %v", documented, want)
	}
}

// The transport's codes are not the domain's.
func TestTransportCodesAreNotDomainCodes(t *testing.T) {
	for _, c := range problem.TransportCodes {
		if slices.Contains(errs.Codes, c) {
			t.Errorf("%s is in both lists", c)
		}
	}
}

func codeConstants(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]string{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || vs.Type == nil {
				return true
			}
			typ := types(vs.Type)
			if typ != "Code" && typ != "errs.Code" {
				return true
			}
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[name.Name] = strings.Trim(lit.Value, `"`)
					}
				}
			}
			return true
		})
	}
	if len(out) == 0 {
		t.Fatalf("no Code constants found in %s", dir)
	}
	return out
}

func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return types(e.X) + "." + e.Sel.Name
	}
	return ""
}
