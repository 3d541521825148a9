package n8nsetup

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

func TestPlanGuardWithTheCommunityNodeRefusesPark(t *testing.T) {
	sp := communitySpec("Post order", "'batch-' + $json.id")
	sp.Park = true
	if _, err := PlanGuard(unguarded(t, "schedule-split-post.json"), sp, testHandlers); err == nil {
		t.Fatal("--park was placed with the community node, whose fail cannot park the failed write")
	}
}

func communitySpec(node, key string) GuardSpec {
	s := spec(node, key)
	s.NodeType = CustomNodeType
	s.Credential = guardCredential{"nodecred", "n8n-guard API"}
	return s
}

// outputs are the nodes each output of a node leads to.
func outputs(s Snapshot, from string) [][]string {
	c, _ := s.Connections[from].(map[string]any)
	main, _ := c["main"].([]any)
	out := make([][]string, len(main))
	for i, o := range main {
		list, _ := o.([]any)
		for _, e := range list {
			m, _ := e.(map[string]any)
			out[i] = append(out[i], fmt.Sprint(m["node"]))
		}
	}
	return out
}

func node(s Snapshot, name string) map[string]any {
	for _, n := range s.Nodes {
		if n["name"] == name {
			return n
		}
	}
	return nil
}

func TestGuardWithTheCommunityNodePassesTheAudit(t *testing.T) {
	for _, c := range []struct {
		name  string
		file  string
		specs []GuardSpec
	}{
		{"webhook, then a POST to the CRM", "webhook-post.json", []GuardSpec{communitySpec("Create contact", "$json.body.event_id")}},
		{"webhook, Code, then two writes", "webhook-code-writes.json", []GuardSpec{communitySpec("Create contact", "{{ $json.event }}"), communitySpec("Add note", "='note-' + $('Shape signup').item.json.event")}},
		{"schedule, split, a POST per item", "schedule-split-post.json", []GuardSpec{communitySpec("Post order", "'batch-' + $json.id")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := guardAll(t, unguarded(t, c.file), c.specs...)
			for _, f := range AuditSnapshot(s, testHandlers) {
				if !f.Guarded {
					t.Errorf("%s is not guarded after the guard: %q", f.Node, f.Problems)
				}
			}
			for _, n := range s.Nodes {
				if Classify(n).Effect == Guard && !n8n.IsCommunityGuard(n) {
					t.Errorf("an HTTP template was placed: %s", n["name"])
				}
			}
			for _, sp := range c.specs {
				sp.ErrorHandler = "handler1"
				rw, err := PlanGuard(s, sp, testHandlers)
				if err != nil || len(rw.Changes) != 0 {
					t.Fatalf("a second guard of %s: %v, changes %q", sp.Node, err, rw.Changes)
				}
				// Neither kind of guard is put on top of the other.
				http := sp
				http.NodeType = ""
				if rw, err := PlanGuard(s, http, testHandlers); err != nil || len(rw.Changes) != 0 {
					t.Fatalf("an HTTP guard after the community one: %v, changes %q", err, rw.Changes)
				}
			}
		})
	}
}

func TestGuardWithTheCommunityNodeWiresReserveCompleteAndFail(t *testing.T) {
	s := guardAll(t, unguarded(t, "webhook-post.json"), communitySpec("Create contact", "$json.body.event_id"))
	names := guardNames("Create contact")
	reserve := node(s, names["reserve"])
	if nodeType(reserve) != CustomNodeType || n8n.GuardOperation(reserve) != "reserve" {
		t.Fatalf("the reserve is %s %s, want the community node's reserve", nodeType(reserve), n8n.GuardOperation(reserve))
	}
	js := mustJSON(reserve)
	for _, want := range []string{`"key":"={{ String(($json.body.event_id) ?? '') }}"`, `"namespace":"e2e-audit-lead-to-crm.create-contact"`,
		`"destination":"httprequest"`, `"n8nGuardApi":{"id":"nodecred","name":"n8n-guard API"}`} {
		if !strings.Contains(js, want) {
			t.Errorf("reserve lacks %s: %s", want, js)
		}
	}
	if strings.Contains(js, "resumeUrl") {
		t.Errorf("a reserve without --park parks: %s", js)
	}
	// Proceed alone leads to the node (through its own item); Already Done
	// and Blocked answer the webhook's sender.
	out := outputs(s, names["reserve"])
	if len(out) != 3 || fmt.Sprint(out[0]) != fmt.Sprint([]string{names["item"]}) ||
		fmt.Sprint(out[1]) != fmt.Sprint([]string{names["answer"]}) || fmt.Sprint(out[2]) != fmt.Sprint([]string{names["answer"]}) {
		t.Fatalf("reserve outputs %v, want Proceed → item, Already Done and Blocked → answer", out)
	}
	if got := outputs(s, names["item"]); fmt.Sprint(got) != "[[Create contact]]" {
		t.Fatalf("item leads to %v", got)
	}
	if js := str(params(node(s, names["item"])), "jsCode"); !strings.Contains(js, "$('Lead webhook').item") {
		t.Fatalf("the item is not restored from the node that fed it: %s", js)
	}
	target := node(s, "Create contact")
	if str(target, "onError") != "continueErrorOutput" {
		t.Fatal("the node's failure does not go to its error output")
	}
	out = outputs(s, "Create contact")
	if len(out) != 2 || out[0][0] != names["complete"] || out[1][0] != names["fail"] {
		t.Fatalf("the node's outputs %v, want complete and fail", out)
	}
	fail := params(node(s, names["fail"]))
	if fail["operation"] != "fail" || fail["reason"] != "auto" {
		t.Fatalf("fail %v, want the reason Auto (the node classifies as the templates do)", fail)
	}
	if got := outputs(s, names["fail"]); fmt.Sprint(got) != fmt.Sprintf("[[%s]]", names["failed"]) || nodeType(node(s, names["failed"])) != "n8n-nodes-base.stopAndError" {
		t.Fatalf("after the fail %v, want the execution stopped", got)
	}
	if p := params(node(s, names["complete"])); p["operation"] != "complete" || !strings.Contains(fmt.Sprint(p["resultRef"]), "$json.id") {
		t.Fatalf("complete %v", p)
	}
	if got := outputs(s, names["output"]); fmt.Sprint(got) != "[[Answer]]" {
		t.Fatalf("the nodes after the write get %v", got)
	}
	if answer := mustJSON(node(s, names["answer"])); !strings.Contains(answer, "code: $json.outcome") {
		t.Fatalf("the answer does not read the node's flat answer: %s", answer)
	}
}

// communityInstance is the fake n8n of resumecred_test.go with the routes
// the detection asks: whether the community node's credential type is
// known (schema: its HTTP status) and 2.x's installed community packages
// (packages: its status and body).
func communityInstance(t *testing.T, major, schema, packagesStatus int, packages any) (*instance, *Instance) {
	t.Helper()
	in := &instance{major: major, data: map[string]map[string]any{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply := func(status int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(v)
		}
		switch r.URL.Path {
		case "/api/v1/credentials/schema/" + CommunityCredentialType:
			props := map[string]any{"baseUrl": map[string]any{"type": "string"}, "token": map[string]any{"type": "string"}}
			if major < 2 {
				// 1.x adds the HTTP Request node's domain restriction.
				props["allowedHttpRequestDomains"] = map[string]any{"type": "string", "enum": []string{"all", "domains", "none"}}
				props["allowedDomains"] = map[string]any{"type": "string"}
			}
			reply(schema, map[string]any{"type": "object", "additionalProperties": false, "properties": props})
		case "/api/v1/community-packages":
			if major < 2 {
				reply(404, map[string]any{"message": "not found"})
				return
			}
			reply(packagesStatus, packages)
		default:
			in.handle(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	v := n8n.Version{Major: major, Minor: 113, Patch: 3, Exact: major < 2}
	return in, &Instance{Client: n8n.New(srv.URL, "key", 0), Version: v}
}

var ourPackage = []map[string]any{{"packageName": CommunityPackage, "installedVersion": "0.1.0",
	"installedNodes": []map[string]any{{"name": "N8n Guard", "type": CommunityNodeType, "latestVersion": 1}}}}

func TestGuardFindsTheCommunityNode(t *testing.T) {
	usesNode := func(in *instance, typ string) {
		in.wfs = append(in.wfs, &n8n.Workflow{ID: "WNODE", Name: "team's own", Nodes: []map[string]any{
			{"name": "Reserve", "type": typ, "parameters": map[string]any{"namespace": "x", "key": "={{ $json.id }}"},
				"credentials": map[string]any{CommunityCredentialType: map[string]any{"id": "TEAMCRED", "name": "guard node"}}},
		}})
	}
	for _, c := range []struct {
		name           string
		major          int
		use            Use
		schema         int
		pkgStatus      int
		pkgs           any
		setup          func(in *instance)
		want           string // node type placed, "" for the HTTP templates
		note, errorMsg string
	}{
		{"not installed: the templates", 2, UseAuto, 404, 200, ourPackage, nil, "", "does not have the community node", ""},
		{"3.x, not installed: the templates, and 3.x's unverified packages said", 3, UseAuto, 404, 200, ourPackage, nil, "", "N8N_UNVERIFIED_PACKAGES_ENABLED=true", ""},
		{"installed as a package (2.x lists it)", 2, UseAuto, 200, 200, ourPackage, nil, CommunityNodeType, "installed as the community package", ""},
		{"a custom extension (2.x: not among the packages)", 2, UseAuto, 200, 200, []any{}, nil, CustomNodeType, "custom extensions folder", ""},
		{"a workflow uses it (1.x)", 1, UseAuto, 200, 0, nil, func(in *instance) { usesNode(in, CustomNodeType) }, CustomNodeType, "a workflow here uses it", ""},
		{"1.x, nobody uses it yet: cannot tell, the templates", 1, UseAuto, 200, 0, nil, nil, "", "cannot be told", ""},
		{"2.x, a key without communityPackage:list: the templates", 2, UseAuto, 200, 403, map[string]any{"message": "Forbidden"}, nil, "", "communityPackage:list", ""},
		{"--use community where it cannot be told: the package's type", 1, UseCommunity, 200, 0, nil, nil, CommunityNodeType, "is assumed", ""},
		{"--use http although it is installed", 2, UseHTTP, 200, 200, ourPackage, nil, "", "--use http", ""},
		{"--use community where it is not installed: refused", 2, UseCommunity, 404, 200, ourPackage, nil, "", "", "does not have the community node"},
		{"n8n cannot answer: the templates, and why", 2, UseAuto, 500, 200, ourPackage, nil, "", "cannot be told", ""},
		{"--park: the templates, whose fail parks the failed write", 2, UseAuto, 200, 200, ourPackage, nil, "", "sends no resume URL", ""},
		{"--use community --park: refused", 2, UseCommunity, 200, 200, ourPackage, nil, "", "", "sends no resume URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			in, inst := communityInstance(t, c.major, c.schema, c.pkgStatus, c.pkgs)
			in.importShipped(t, workflows.ErrorHandlerID)
			in.creds = append(in.creds, Credential{ID: "CRED", Name: workflows.CredentialName, Type: workflows.CredentialType})
			if c.major < 2 {
				workflows.PointCredential(in.wfs[0].Nodes, "CRED", workflows.CredentialName)
			}
			if c.setup != nil {
				c.setup(in)
			}
			w := in.addUnguarded(t, false)
			sp := GuardSpec{Node: "Create contact", Key: "$json.body.event_id"}
			if strings.Contains(c.name, "--park") {
				// The schedule → split workflow: parking in front of a
				// Respond to Webhook is refused whatever the nodes.
				s := unguarded(t, "schedule-split-post.json")
				w.Nodes, w.Connections = s.Nodes, s.Connections
				sp = GuardSpec{Node: "Post order", Key: "'batch-' + $json.id", Park: true}
				in.creds = append(in.creds, Credential{ID: "RES", Name: workflows.ResumeCredentialName, Type: workflows.CredentialType})
			}
			rep, err := inst.Guard(ctx, GuardOptions{WorkflowID: w.ID, Use: c.use, Token: "tok", Spec: sp})
			if c.errorMsg != "" {
				if err == nil || !strings.Contains(err.Error(), c.errorMsg) {
					t.Fatalf("Guard = %v, want an error about %q", err, c.errorMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(fmt.Sprint(rep.Steps), c.note) {
				t.Errorf("report %v does not say %q", rep.Steps, c.note)
			}
			reserve := newGraph(w.Nodes, w.Connections).nodes[guardNames(sp.Node)["reserve"]]
			got := ""
			if n8n.IsCommunityGuard(reserve) {
				got = nodeType(reserve)
			}
			if got != c.want {
				t.Fatalf("reserve placed as %q (%s), want %q", nodeType(reserve), got, c.want)
			}
		})
	}
}

func TestGuardFindsOrCreatesTheCommunityNodesCredential(t *testing.T) {
	for _, c := range []struct {
		name     string
		major    int
		creds    []Credential
		used     string // credential id a team workflow's node uses
		token    string
		wantID   string
		created  bool
		notFound bool
	}{
		{"2.x: the one named n8n-guard API", 2, []Credential{{ID: "A", Name: "other", Type: CommunityCredentialType}, {ID: "B", Name: CommunityCredentialName, Type: CommunityCredentialType}}, "A", "tok", "B", false, false},
		{"2.x: the one the team's nodes use", 2, []Credential{{ID: "A", Name: "x", Type: CommunityCredentialType}, {ID: "C", Name: "y", Type: CommunityCredentialType}}, "C", "tok", "C", false, false},
		{"2.x: none, made from the token", 2, nil, "", "tok", "", true, false},
		{"2.x: none and no token: not done", 2, nil, "", "", "", false, true},
		{"1.x: the team's nodes' reference is trusted", 1, nil, "TEAMCRED", "tok", "TEAMCRED", false, false},
		{"1.x: none used, made with the domain restriction 1.x's API requires", 1, nil, "", "tok", "", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			in, inst := communityInstance(t, c.major, 200, 200, []any{})
			in.importShipped(t, workflows.ErrorHandlerID)
			in.creds = append(in.creds, c.creds...)
			if c.used != "" {
				in.wfs = append(in.wfs, &n8n.Workflow{ID: "WNODE", Name: "team's own", Nodes: []map[string]any{
					{"name": "Reserve", "type": CustomNodeType, "parameters": map[string]any{"namespace": "x", "key": "={{ $json.id }}"},
						"credentials": map[string]any{CommunityCredentialType: map[string]any{"id": c.used, "name": "n"}}},
				}})
			}
			w := in.addUnguarded(t, false)
			rep, err := inst.Guard(ctx, GuardOptions{WorkflowID: w.ID, Use: UseCommunity, Token: c.token,
				Spec: GuardSpec{Node: "Create contact", Key: "$json.body.event_id"}})
			if c.notFound {
				if err == nil || rep.count(NotDone) == 0 || in.saves != 0 {
					t.Fatalf("Guard = %v, %d not done, %d saves: want it refused, nothing saved", err, rep.count(NotDone), in.saves)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.wantID
			if c.created {
				var made *Credential
				for i := range in.creds {
					if in.creds[i].Type == CommunityCredentialType {
						made = &in.creds[i]
					}
				}
				guardURL, _ := workflows.ConfigValue(in.wfs[0].Nodes, workflows.GuardURL)
				if made == nil || made.Name != CommunityCredentialName || in.data[made.ID]["token"] != "tok" || in.data[made.ID]["baseUrl"] != fmt.Sprint(guardURL) {
					t.Fatalf("credential made %+v with %v, want %q with the guard's address and token", made, in.data, CommunityCredentialName)
				}
				// 1.x requires allowedDomains unless the restriction is
				// given; 2.x refuses the unknown field.
				if got, want := in.data[made.ID]["allowedHttpRequestDomains"], map[bool]any{true: "all", false: nil}[c.major < 2]; got != want {
					t.Fatalf("allowedHttpRequestDomains %v, want %v on %d.x", got, want, c.major)
				}
				want = made.ID
			}
			for _, n := range w.Nodes {
				if n8n.IsCommunityGuard(n) {
					ref := n["credentials"].(map[string]any)[CommunityCredentialType].(map[string]any)
					if ref["id"] != want {
						t.Fatalf("%s uses credential %v, want %s", n["name"], ref["id"], want)
					}
				}
			}
		})
	}
}
