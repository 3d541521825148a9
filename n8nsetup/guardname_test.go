package n8nsetup

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// hostileNames are node names an n8n user may type that are code in
// JavaScript: every line terminator JavaScript knows (a line break in a
// name once ended the // comment it was written into and made the rest
// code), a comment's end, a template literal, an expression's braces.
var hostileNames = map[string]string{
	"a line feed":        "Create\nreason = 'validation_failed'; //",
	"a carriage return":  "Create\rstatus = 400; //",
	"a line separator":   "Create\u2028status = 400; //",
	"a paragraph sep.":   "Create\u2029}); throw new Error('x'); (function(){ //",
	"a comment's end":    "Create */ status = 400; /*",
	"a template literal": "Create `${status = 400}` contact",
	"expression braces":  "Create {{ $env.SECRET }} }} contact",
	"quotes":             `Create 'contact' "x" \ \' done`,
}

// renamed is s with its node old named name everywhere the workflow
// names it (the node and the connections).
func renamed(t *testing.T, s Snapshot, old, name string) Snapshot {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := json.Marshal(name)
	var out Snapshot
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(b), `"`+old+`"`, string(q))), &out); err != nil {
		t.Fatal(err)
	}
	if node(out, name) == nil {
		t.Fatalf("no node %q after the rename", name)
	}
	return out
}

// The Code nodes and Stop messages the rewrite writes are code; a node's
// name in them is a string literal, never code: each Code node parses in
// Node (n8n runs it as a function body), each {{ }} of a message parses
// as an expression, the name is never outside a string, and the
// classification of the node's 503 and 504 stays what the templates say.
func TestGuardWritesHostileNodeNamesAsStringsOnly(t *testing.T) {
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIP: Node is not installed")
	}
	dir := t.TempDir()
	// check parses each piece of code in Node, one Node for all of them.
	check := func(t *testing.T, code map[string]string) {
		t.Helper()
		var all strings.Builder
		for what, js := range code {
			all.WriteString("// " + strings.NewReplacer("\n", " ", "\r", " ", "\u2028", " ", "\u2029", " ").Replace(what) + "\n" + js + "\n")
		}
		f := filepath.Join(dir, "code.js")
		if err := os.WriteFile(f, []byte(all.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(nodeBin, "--check", f).CombinedOutput(); err != nil {
			t.Fatalf("the generated code does not parse: %v\n%s\n--- code ---\n%s", err, out, all.String())
		}
	}
	expr := regexp.MustCompile(`\{\{(.*?)\}\}`)
	for label, name := range hostileNames {
		for _, how := range []struct {
			label     string
			file, old string
			spec      func() GuardSpec
		}{
			{"templates", "webhook-post.json", "Create contact", func() GuardSpec { return spec(name, "$json.body.event_id") }},
			{"templates, parked", "schedule-split-post.json", "Post order", func() GuardSpec { s := spec(name, "'batch-' + $json.id"); s.Park = true; return s }},
			{"community node", "webhook-post.json", "Create contact", func() GuardSpec { return communitySpec(name, "$json.body.event_id") }},
		} {
			t.Run(label+"/"+how.label, func(t *testing.T) {
				s := guardAll(t, renamed(t, unguarded(t, how.file), how.old, name), how.spec())
				code := map[string]string{}
				codes := 0
				for _, n := range s.Nodes {
					p := params(n)
					switch nodeType(n) {
					case "n8n-nodes-base.code":
						js := str(p, "jsCode")
						if strings.ContainsAny(name, "\n\r\u2028\u2029") && strings.Contains(js, name) {
							t.Errorf("%s: the name is written raw, its line break and all:\n%s", n["name"], js)
						}
						for _, line := range strings.Split(js, "\n") {
							if strings.HasPrefix(line, "//") && strings.ContainsAny(line, "\r\u2028\u2029") {
								t.Errorf("%s: a comment holds a line terminator: %q", n["name"], line)
							}
						}
						code[str(n, "name")] = "(async function () {\n" + js + "\n});"
						codes++
					case "n8n-nodes-base.stopAndError":
						msg := str(p, "errorMessage")
						lit := expr.ReplaceAllString(msg, "")
						if strings.Contains(lit, "{{") || strings.Contains(lit, "}}") || strings.ContainsAny(lit, "\n\r\u2028\u2029") {
							t.Errorf("%s: the name is outside a string in %q", n["name"], msg)
						}
						for i, m := range expr.FindAllStringSubmatch(msg, -1) {
							code[str(n, "name")+" "+strconv.Itoa(i)] = "(function () { return (" + m[1] + "); });"
						}
					}
				}
				if codes == 0 {
					t.Fatal("no Code node was written")
				}
				check(t, code)
				if how.label == "community node" {
					return // the community node classifies in TypeScript
				}
				classify := str(params(node(s, guardNames(name)["classify"])), "jsCode")
				statuses := []string{"503", "504", "400"}
				want := []string{"destination_failed", "outcome_unknown", "validation_failed"}
				prog := "const classify = ($json) => {\n" + classify + "\n};\nconsole.log(JSON.stringify(" +
					"['" + strings.Join(statuses, "','") + "'].map((s) => classify({ error: { httpCode: s, message: 'x' } }).json)));\n"
				out, err := exec.Command(nodeBin, "-e", prog).CombinedOutput()
				if err != nil {
					t.Fatalf("node: %v\n%s", err, out)
				}
				var got []struct{ Reason, Message string }
				if err := json.Unmarshal(out, &got); err != nil || len(got) != len(statuses) {
					t.Fatalf("classified: %s (%v)", out, err)
				}
				for i, g := range got {
					if g.Reason != want[i] {
						t.Errorf("HTTP %s classified %q, want %s", statuses[i], g.Reason, want[i])
					}
					if !strings.HasPrefix(g.Message, name+": ") {
						t.Errorf("the message %q does not name the node as it is", g.Message)
					}
				}
			})
		}
	}
}
