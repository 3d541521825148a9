package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestShippedHandlerFirst(t *testing.T) {
	shipped, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	if len(shipped) != 4 || shipped[0].ID != ErrorHandlerID {
		t.Fatalf("Shipped() = %d workflows starting with %q, want 4 with the error handler first", len(shipped), shipped[0].ID)
	}
	for _, wf := range shipped[1:] {
		if wf.Settings["errorWorkflow"] != ErrorHandlerID {
			t.Errorf("%s: errorWorkflow %v, want %s", wf.ID, wf.Settings["errorWorkflow"], ErrorHandlerID)
		}
	}
}

func TestSetConfig(t *testing.T) {
	shipped, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	nodes := shipped[0].Nodes
	t.Run("a value the Config node has is set", func(t *testing.T) {
		if !SetConfig(nodes, GuardURL, "http://guard:1") {
			t.Fatal("SetConfig(guard_url) = false")
		}
		if v, ok := ConfigValue(nodes, GuardURL); !ok || v != "http://guard:1" {
			t.Fatalf("ConfigValue = %v, %v", v, ok)
		}
	})
	t.Run("a value it lacks is refused, not added", func(t *testing.T) {
		if SetConfig(nodes, "crm_base_url", "x") {
			t.Fatal("the error handler has no crm_base_url, yet SetConfig said it set one")
		}
		if _, ok := ConfigValue(nodes, "crm_base_url"); ok {
			t.Fatal("crm_base_url appeared")
		}
	})
	t.Run("a workflow without a Config node", func(t *testing.T) {
		if SetConfig([]map[string]any{{"name": "Webhook"}}, GuardURL, "x") {
			t.Fatal("SetConfig on no Config node = true")
		}
	})
}

func TestPointCredential(t *testing.T) {
	shipped, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	nodes := shipped[1].Nodes
	PointCredential(nodes, "real-id", "real name")
	n := 0
	for _, node := range nodes {
		if id, ok := UsesCredential(node); ok {
			n++
			if id != "real-id" {
				t.Errorf("node %v still uses %s", node["name"], id)
			}
		}
	}
	if n < 3 {
		t.Fatalf("%d nodes use the guard's credential, want reserve, complete and fail", n)
	}
	for _, node := range nodes {
		if id, ok := UsesResumeCredential(node); ok && id != ResumeCredentialID {
			t.Errorf("PointCredential moved the Wait node %v to %s: it checks the resume credential", node["name"], id)
		}
	}
}

func TestTemplate(t *testing.T) {
	for _, name := range []string{"config", "reserve", "reserve-park", "wait", "complete", "fail", "lookup", "resolve"} {
		if _, err := Template(name); err != nil {
			t.Errorf("Template(%s): %v", name, err)
		}
	}
	if _, err := Template("nope"); err == nil {
		t.Error("Template(nope) found something")
	}
}

// The shipped workflows park by default: the reserve and the fail carry
// the execution's resume URL, a parked key is answered 202 queued, the
// execution waits in a Wait node that checks the resume credential, and
// the woken execution goes back to the reserve. What runs after the Wait
// node never reaches a Respond to Webhook node: the sender was answered.
// (The behaviour in a real n8n: e2e/park_test.go.)
func TestShippedWorkflowsPark(t *testing.T) {
	shipped, err := Shipped()
	if err != nil {
		t.Fatal(err)
	}
	parking := 0
	for _, wf := range shipped[1:] {
		if wf.ID == LeadCheckID {
			continue // a check writes nothing: it has nothing to park (TestChecksShape)
		}
		parking++
		t.Run(wf.Name, func(t *testing.T) {
			byName := map[string]map[string]any{}
			for _, n := range wf.Nodes {
				byName[n["name"].(string)] = n
			}
			body := func(name string) string {
				p, _ := byName[name]["parameters"].(map[string]any)
				s, _ := p["jsonBody"].(string)
				return s
			}
			var fail string
			for name := range byName {
				if strings.HasSuffix(fmt.Sprint(byName[name]["parameters"].(map[string]any)["url"]), "/v1/fail") {
					fail = name
				}
			}
			if !strings.Contains(body("Reserve key"), "resume_url: $execution.resumeUrl") {
				t.Error("Reserve key does not send resume_url: $execution.resumeUrl")
			}
			// The fail parks only for the reasons that park (the execution
			// then waits); an unknown outcome ends the execution, so a resume
			// URL would name one that no longer waits (a check's "absent"
			// would resume a finished execution: lost).
			if want := "resume_url: ['destination_unreachable', 'destination_failed'].includes($json.reason) ? $execution.resumeUrl : undefined"; !strings.Contains(body(fail), want) {
				t.Errorf("%q does not send resume_url for the parking reasons only: %s", fail, body(fail))
			}
			if !strings.Contains(body("Reserve key"), "$runIndex") {
				t.Error("Reserve key's request_id does not tell the resumed reserve from the first ($runIndex)")
			}

			var waits []string
			for name, n := range byName {
				if n["type"] == WaitNodeType {
					waits = append(waits, name)
				}
			}
			if len(waits) != 1 {
				t.Fatalf("Wait nodes %v, want one", waits)
			}
			w := byName[waits[0]]
			p := w["parameters"].(map[string]any)
			if p["resume"] != "webhook" || p["httpMethod"] != "POST" || p["incomingAuthentication"] != "headerAuth" || w["webhookId"] == nil {
				t.Errorf("Wait node %v, want resume on a POST webhook call with Header Auth and a webhookId", p)
			}
			if id, ok := UsesResumeCredential(w); !ok || id != ResumeCredentialID {
				t.Errorf("the Wait node checks credential %q, want %s", id, ResumeCredentialID)
			}
			if next := successors(wf, waits[0], -1); len(next) != 1 || next[0] != "Reserve key" {
				t.Errorf("the Wait node leads to %v, want back to Reserve key", next)
			}
			if !strings.Contains(code(byName["Answer: queued"]), "status: 202") || !strings.Contains(code(byName["Answer: queued"]), "code: 'queued'") {
				t.Error("Answer: queued does not answer 202 queued")
			}
			if got := answersAfter(wf, waits[0]); len(got) != 0 {
				t.Errorf("a resumed execution can reach %v: it would answer its sender a second time", got)
			}

			// The check above fails when the gate is bypassed.
			var broken Workflow
			b, _ := json.Marshal(wf)
			_ = json.Unmarshal(b, &broken)
			broken.Connections["Sender waiting?"] = map[string]any{"main": []any{
				[]any{map[string]any{"node": "Retry later?", "type": "main", "index": 0}},
				[]any{map[string]any{"node": "Retry later?", "type": "main", "index": 0}}}}
			if len(answersAfter(broken, waits[0])) == 0 {
				t.Error("a workflow whose resumed runs reach the answer is not caught")
			}
		})
	}
	if parking != 2 {
		t.Fatalf("%d parking workflows, want lead and booking", parking)
	}
}

func code(n map[string]any) string {
	p, _ := n["parameters"].(map[string]any)
	s, _ := p["jsCode"].(string)
	return s
}

// successors are the nodes connected to output out of name (-1: any).
func successors(wf Workflow, name string, out int) []string {
	c, _ := wf.Connections[name].(map[string]any)
	outs, _ := c["main"].([]any)
	var next []string
	for i, o := range outs {
		if out >= 0 && i != out {
			continue
		}
		list, _ := o.([]any)
		for _, t := range list {
			next = append(next, t.(map[string]any)["node"].(string))
		}
	}
	return next
}

// answersAfter lists the Respond to Webhook nodes reachable from the
// Wait node, not through the true output of an If that lets only an
// execution that has not waited go on ("!$('<wait>').isExecuted").
func answersAfter(wf Workflow, wait string) []string {
	byName := map[string]map[string]any{}
	for _, n := range wf.Nodes {
		byName[n["name"].(string)] = n
	}
	gate := "!$('" + wait + "').isExecuted"
	seen := map[string]bool{}
	var found []string
	var walk func(string)
	walk = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		n := byName[name]
		if n["type"] == "n8n-nodes-base.respondToWebhook" {
			found = append(found, name)
		}
		b, _ := json.Marshal(n["parameters"])
		if n["type"] == "n8n-nodes-base.if" && strings.Contains(string(b), gate) {
			for _, next := range successors(wf, name, 1) {
				walk(next)
			}
			return
		}
		for _, next := range successors(wf, name, -1) {
			walk(next)
		}
	}
	for _, next := range successors(wf, wait, -1) {
		walk(next)
	}
	return found
}
