package n8nsetup

import (
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// The commands against a real n8n (fresh, ten workflows, a second run, a
// wrong key) are proven in e2e/setup_test.go; these are the rules they
// decide by.

func handler(t *testing.T) workflows.Workflow {
	t.Helper()
	shipped, err := workflows.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	if shipped[0].ID != workflows.ErrorHandlerID {
		t.Fatalf("Shipped()[0] is %s, want the error handler first", shipped[0].ID)
	}
	return shipped[0]
}

func TestDesiredHandler(t *testing.T) {
	cred := guardCredential{"abc123", workflows.CredentialName}
	t.Run("guard address and credential are set, the shipped value is untouched", func(t *testing.T) {
		shipped := handler(t)
		want, err := desired(shipped, nil, cred, guardCredential{}, "http://guard:8080")
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := workflows.ConfigValue(want.Nodes, workflows.GuardURL); v != "http://guard:8080" {
			t.Errorf("guard_url = %v", v)
		}
		used := 0
		for _, n := range want.Nodes {
			if id, ok := workflows.UsesCredential(n); ok {
				used++
				if id != "abc123" {
					t.Errorf("node %v uses credential %s, want abc123", n["name"], id)
				}
			}
		}
		if used == 0 {
			t.Error("no node uses the guard's credential")
		}
		if v, _ := workflows.ConfigValue(shipped.Nodes, workflows.GuardURL); v == "http://guard:8080" {
			t.Error("desired changed the shipped workflow")
		}
	})
	t.Run("without --guard-url the installed address stays", func(t *testing.T) {
		installed, err := desired(handler(t), nil, cred, guardCredential{}, "http://kept:9090")
		if err != nil {
			t.Fatal(err)
		}
		want, err := desired(handler(t), &n8n.Workflow{Nodes: installed.Nodes}, cred, guardCredential{}, "")
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := workflows.ConfigValue(want.Nodes, workflows.GuardURL); v != "http://kept:9090" {
			t.Errorf("guard_url = %v, want the installed http://kept:9090", v)
		}
	})
	t.Run("no address at all is an error that names the flag", func(t *testing.T) {
		if _, err := desired(handler(t), nil, cred, guardCredential{}, ""); err == nil || !strings.Contains(err.Error(), "--guard-url") {
			t.Fatalf("err = %v, want one naming --guard-url", err)
		}
	})
}

func TestSameNodes(t *testing.T) {
	cred := guardCredential{"abc123", workflows.CredentialName}
	a, _ := desired(handler(t), nil, cred, guardCredential{}, "http://guard:8080")
	b, _ := desired(handler(t), nil, cred, guardCredential{}, "http://guard:8080")
	for _, n := range b.Nodes {
		n["position"] = []any{999, 999} // moved in the editor
		n["id"] = "new-id"
	}
	if !sameNodes(a.Nodes, b.Nodes) {
		t.Error("moved nodes with new ids count as a change")
	}
	workflows.SetConfig(b.Nodes, workflows.GuardURL, "http://elsewhere:8080")
	if sameNodes(a.Nodes, b.Nodes) {
		t.Error("another guard address does not count as a change")
	}
	c, _ := desired(handler(t), nil, guardCredential{"other", workflows.CredentialName}, guardCredential{}, "http://guard:8080")
	if sameNodes(a.Nodes, c.Nodes) {
		t.Error("another credential does not count as a change")
	}
}

func TestWhySilent(t *testing.T) {
	published := "v1"
	handler := n8n.Workflow{ID: "H", Name: "handler", Active: true, ActiveVersionID: &published,
		Nodes: []map[string]any{{"type": "n8n-nodes-base.errorTrigger"},
			{"credentials": map[string]any{workflows.CredentialType: map[string]any{"id": "C"}}}}}
	draft := handler
	draft.ID, draft.Active, draft.ActiveVersionID = "D", false, nil
	byID := map[string]n8n.Workflow{"H": handler, "D": draft}
	with := func(ew string) n8n.Workflow {
		return n8n.Workflow{ID: "W", Settings: map[string]any{"errorWorkflow": ew}}
	}
	for _, c := range []struct {
		name   string
		major  int
		w      n8n.Workflow
		creds  map[string]bool
		listed bool
		want   string
	}{
		{"no error workflow", 2, n8n.Workflow{ID: "W"}, nil, true, "no error workflow"},
		{"error workflow gone", 2, with("X"), nil, true, "does not exist"},
		{"error workflow unpublished on 2.x", 2, with("D"), map[string]bool{"C": true}, true, "not published"},
		{"unpublished is fine on 1.x", 1, with("D"), nil, false, ""},
		{"its credential is missing", 2, with("H"), map[string]bool{}, true, "credential C"},
		{"credentials not listable: trusted", 2, with("H"), nil, false, ""},
		{"all well", 2, with("H"), map[string]bool{"C": true}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := whySilent(c.major, c.w, byID, c.creds, c.listed)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("whySilent = %q, want %q", got, c.want)
			}
		})
	}
}
