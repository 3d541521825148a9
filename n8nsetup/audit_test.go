package n8nsetup

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// readWorkflow reads a workflow as n8n's public API or an export gives it.
func readWorkflow(t *testing.T, path string) n8n.Workflow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var w n8n.Workflow
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return w
}

func nodeNamed(t *testing.T, w n8n.Workflow, name string) map[string]any {
	t.Helper()
	for _, n := range w.Nodes {
		if n["name"] == name {
			return n
		}
	}
	t.Fatalf("%s has no node %q", w.Name, name)
	return nil
}

func TestClassifyNodesOfRealWorkflows(t *testing.T) {
	v1 := readWorkflow(t, "testdata/v1-lead-sync.json")
	v2 := readWorkflow(t, "testdata/v2-orders.json")
	for _, c := range []struct {
		name string
		w    n8n.Workflow
		node string
		want Effect
		op   string
	}{
		{"a webhook trigger moves nothing", v1, "Form webhook", Internal, ""},
		{"a Set node moves nothing", v1, "Map lead", Internal, ""},
		{"HubSpot search reads", v1, "Find contact", Read, "search"},
		{"HubSpot upsert writes", v1, "Upsert contact", Write, "upsert"},
		{"Slack without an operation posts a message (n8n's default)", v1, "Tell sales", Write, "post"},
		{"Google Sheets append writes", v1, "Log row", Write, "append"},
		{"Google Sheets without an operation reads: n8n's default in 4.5 is sheet/read", v1, "Read sheet", Read, "read"},
		{"Postgres execute query writes", v1, "Audit trail", Write, "executeQuery"},
		{"Postgres select reads", v1, "Lookup owner", Read, "select"},
		{"HTTP Request without a method is a GET", v1, "Enrich", Read, "GET"},
		{"HTTP Request PATCH writes", v1, "Notify CRM", Write, "PATCH"},
		{"a node the audit does not know is unclassified", v1, "Ticket", Unclassified, ""},
		{"a community node the audit does not know is unclassified", v1, "Acme CRM", Unclassified, ""},
		{"Send Email sends", v1, "Send welcome", Write, "send"},
		{"HTTP Request v1 names its method requestMethod", v1, "Old style POST", Write, "POST"},
		{"HTTP Request v1 without a method is a GET", v1, "Old style GET", Read, "GET"},
		{"a schedule trigger moves nothing", v2, "Every hour", Internal, ""},
		{"Split Out moves nothing", v2, "One per order", Internal, ""},
		{"HTTP Request POST writes", v2, "Post to ERP", Write, "POST"},
		{"Gmail without an operation sends", v2, "Mail receipt", Write, "send"},
		{"Telegram without an operation sends a message", v2, "Ping ops", Write, "sendMessage"},
		{"Airtable create writes", v2, "Record order", Write, "create"},
		{"Notion database page create writes", v2, "Order page", Write, "databasePage/create"},
		{"Notion getAll reads", v2, "Find page", Read, "databasePage/getAll"},
		{"Stripe customer create writes", v2, "Stripe customer", Write, "customer/create"},
		{"Stripe customer get reads", v2, "Stripe lookup", Read, "customer/get"},
		{"MySQL update writes", v2, "Stock", Write, "update"},
		{"Pipedrive deal create writes", v2, "Deal", Write, "deal/create"},
		{"Salesforce getAll reads", v2, "Opportunity", Read, "opportunity/getAll"},
		{"an AI agent node is unclassified", v2, "Agent", Unclassified, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Classify(nodeNamed(t, c.w, c.node))
			if got.Effect != c.want || got.Operation != c.op {
				t.Fatalf("Classify(%s) = %+v, want %s %q", c.node, got, c.want, c.op)
			}
		})
	}
}

func findingNodes(fs []Finding, version string) []string {
	var out []string
	for _, f := range fs {
		if f.Version == version {
			out = append(out, f.Node)
		}
	}
	return out
}

func TestAuditListsEveryWriteOfA1xWorkflow(t *testing.T) {
	w := readWorkflow(t, "testdata/v1-lead-sync.json")
	snaps, note := snapshots(w)
	if len(snaps) != 1 || note != "" {
		t.Fatalf("a 1.x workflow gave %d versions (%q), want one", len(snaps), note)
	}
	fs := AuditSnapshot(snaps[0], map[string]bool{"n8nGuardErrors01": true})
	want := []string{"Upsert contact", "Tell sales", "Log row", "Audit trail", "Notify CRM", "Ticket", "Acme CRM", "Send welcome", "Old style POST"}
	if got := findingNodes(fs, ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("findings %v, want %v", got, want)
	}
	for _, f := range fs {
		if f.Guarded || !strings.Contains(strings.Join(f.Problems, "|"), "no reserve of n8n-guard on the path from Form webhook") {
			t.Errorf("%s: guarded %v, problems %q", f.Node, f.Guarded, f.Problems)
		}
		if !strings.Contains(f.Problems[len(f.Problems)-1], "error workflow") {
			t.Errorf("%s: a workflow without the guard's error workflow is not said: %q", f.Node, f.Problems)
		}
		if !strings.HasPrefix(f.Fix, "n8n-guard n8n guard --workflow Lq3uYt7XbN0cVd21 --node '"+f.Node+"' --key ") {
			t.Errorf("%s: fix %q, want the guard command", f.Node, f.Fix)
		}
	}
}

func TestAuditReadsThePublishedVersionAndTheDraftOf2x(t *testing.T) {
	w := readWorkflow(t, "testdata/v2-orders.json")
	snaps, note := snapshots(w)
	if len(snaps) != 2 || note != "" {
		t.Fatalf("a 2.x workflow with unpublished edits gave %d versions (%q), want published and draft", len(snaps), note)
	}
	var fs []Finding
	for _, s := range snaps {
		fs = append(fs, AuditSnapshot(s, map[string]bool{"n8nGuardErrors01": true})...)
	}
	pub := []string{"Post to ERP", "Mail receipt", "Ping ops", "Record order", "Order page", "Stripe customer", "Stock", "Deal", "Agent"}
	if got := findingNodes(fs, "published"); !reflect.DeepEqual(got, pub) {
		t.Fatalf("published findings %v, want %v", got, pub)
	}
	if got := findingNodes(fs, "draft"); !reflect.DeepEqual(got, append(pub, "Charge")) {
		t.Fatalf("draft findings %v, want the published ones and Charge", got)
	}
	for _, f := range fs {
		if strings.Contains(strings.Join(f.Problems, "|"), "error workflow") {
			t.Errorf("%s: the guard's error workflow is named, yet: %q", f.Node, f.Problems)
		}
	}

	published := w
	id := w.VersionID
	published.ActiveVersionID = &id
	if snaps, _ := snapshots(published); len(snaps) != 1 || snaps[0].Version != "" {
		t.Fatalf("a 2.x workflow without unpublished edits gave %+v, want one version", snaps)
	}
	noContent := w
	noContent.ActiveVersion = nil
	if snaps, note := snapshots(noContent); len(snaps) != 1 || !strings.Contains(note, "did not return its published version") {
		t.Fatalf("without the published content: %d versions, note %q", len(snaps), note)
	}
}

// shipped reads one of the shipped (or e2e-proven) workflows.
func shippedSnapshot(t *testing.T, path string) Snapshot {
	t.Helper()
	w := readWorkflow(t, path)
	return Snapshot{ID: w.ID, Name: w.Name, Nodes: w.Nodes, Connections: w.Connections, Settings: w.Settings}
}

// edit returns a deep copy of s changed by f.
func edit(s Snapshot, f func(s *Snapshot, node func(string) map[string]any)) Snapshot {
	var c Snapshot
	b, _ := json.Marshal(s)
	_ = json.Unmarshal(b, &c)
	f(&c, func(name string) map[string]any {
		for _, n := range c.Nodes {
			if n["name"] == name {
				return n
			}
		}
		panic(name)
	})
	return c
}

func connect(s *Snapshot, from string, outputs ...[]string) {
	var main []any
	for _, targets := range outputs {
		var out []any
		for _, to := range targets {
			out = append(out, map[string]any{"node": to, "type": "main", "index": 0})
		}
		main = append(main, out)
	}
	s.Connections[from] = map[string]any{"main": main}
}

func TestGuardedMeansEveryRuleHolds(t *testing.T) {
	handlers := map[string]bool{workflows.ErrorHandlerID: true}
	lead := shippedSnapshot(t, "../workflows/lead-to-crm.json")
	community := shippedSnapshot(t, "../e2e/testdata/community/workflow.json")
	for _, c := range []struct {
		name    string
		s       Snapshot
		node    string
		problem string // "" for guarded
	}{
		{"the shipped lead workflow (HTTP templates)", lead, "Write to CRM", ""},
		{"the community node workflow", community, "Create contact", ""},
		{"a second trigger that bypasses the reserve", edit(lead, func(s *Snapshot, node func(string) map[string]any) {
			s.Nodes = append(s.Nodes, map[string]any{"name": "Run by hand", "type": "n8n-nodes-base.manualTrigger", "typeVersion": 1, "parameters": map[string]any{}})
			connect(s, "Run by hand", []string{"Write to CRM"})
		}), "Write to CRM", "no reserve of n8n-guard on the path from Run by hand"},
		{"writing whatever the reserve answers", edit(lead, func(s *Snapshot, node func(string) map[string]any) {
			connect(s, "Reserve key", []string{"Reserved?", "Write to CRM"}, []string{"Guard unreachable"})
		}), "Write to CRM", `does not answer proceed`},
		{"the community node's parking loop (Parked → Wait → the same Reserve, as its README wires it)", edit(community, func(s *Snapshot, node func(string) map[string]any) {
			s.Nodes = append(s.Nodes,
				map[string]any{"name": "Answer parked", "type": "n8n-nodes-base.respondToWebhook", "typeVersion": 1.1, "parameters": map[string]any{}},
				map[string]any{"name": "Wait for resume", "type": "n8n-nodes-base.wait", "typeVersion": 1.1, "parameters": map[string]any{"resume": "webhook"}})
			connect(s, "Reserve", []string{"Create contact"}, []string{"Answer already done"}, []string{"Answer blocked"}, []string{"Answer parked"})
			connect(s, "Answer parked", []string{"Wait for resume"})
			connect(s, "Wait for resume", []string{"Reserve"})
		}), "Create contact", ""},
		{"the community node's Blocked output into the write", edit(community, func(s *Snapshot, node func(string) map[string]any) {
			connect(s, "Reserve", []string{"Create contact"}, []string{"Answer already done"}, []string{"Create contact"})
		}), "Create contact", `does not answer proceed`},
		{"a key made from the execution", edit(lead, func(s *Snapshot, node func(string) map[string]any) {
			p := node("Reserve key")["parameters"].(map[string]any)
			p["jsonBody"] = strings.Replace(p["jsonBody"].(string), "key: $('Normalise lead').first().json.key", "key: $execution.id", 1)
		}), "Write to CRM", "is not stable"},
		{"a key from a Set node that takes the time", edit(community, func(s *Snapshot, node func(string) map[string]any) {
			s.Nodes = append(s.Nodes, map[string]any{"name": "Key", "type": "n8n-nodes-base.set", "typeVersion": 3.4, "parameters": map[string]any{
				"assignments": map[string]any{"assignments": []any{map[string]any{"name": "key", "value": "={{ $now.toISO() }}", "type": "string"}}}}})
			connect(s, "Webhook", []string{"Key"})
			connect(s, "Key", []string{"Reserve"})
			node("Reserve")["parameters"].(map[string]any)["key"] = "={{ $json.key }}"
		}), "Create contact", "is not stable"},
		{"nothing completes after the write", edit(community, func(s *Snapshot, node func(string) map[string]any) {
			connect(s, "Create contact", []string{"Answer accepted"}, []string{"Fail"})
		}), "Create contact", "nothing completes the key"},
		{"the write's failure stops the execution", edit(community, func(s *Snapshot, node func(string) map[string]any) {
			delete(node("Create contact"), "onError")
		}), "Create contact", "its failure stops the execution"},
		{"the error output does not fail the key", edit(community, func(s *Snapshot, node func(string) map[string]any) {
			connect(s, "Create contact", []string{"Complete"}, []string{"Answer failed"})
		}), "Create contact", "does not fail the key"},
		{"a fail without a reason", edit(lead, func(s *Snapshot, node func(string) map[string]any) {
			p := node("Fail key")["parameters"].(map[string]any)
			p["jsonBody"] = "={{ JSON.stringify({ namespace: 'crm-contacts', key: $('Normalise lead').first().json.key, token: $('Reserve key').first().json.body.token }) }}"
		}), "Write to CRM", "does not fail the key with a reason"},
		{"a write that nothing leads to", edit(lead, func(s *Snapshot, node func(string) map[string]any) {
			s.Nodes = append(s.Nodes, map[string]any{"name": "Loose POST", "type": "n8n-nodes-base.httpRequest", "typeVersion": 4.2, "parameters": map[string]any{"method": "POST", "url": "https://crm.example.com/x"}})
		}), "Loose POST", "no reserve of n8n-guard in front of it"},
		{"another error workflow", edit(lead, func(s *Snapshot, node func(string) map[string]any) {
			s.Settings["errorWorkflow"] = "someOtherHandler"
		}), "Write to CRM", problemErrorWorkflow},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f *Finding
			for _, x := range AuditSnapshot(c.s, handlers) {
				if x.Node == c.node {
					f = &x
				} else if !x.Guarded && c.problem == "" {
					t.Errorf("%s is not guarded: %q", x.Node, x.Problems)
				}
			}
			if f == nil {
				t.Fatalf("%s is not listed as a write", c.node)
			}
			got := strings.Join(f.Problems, "|")
			switch {
			case c.problem == "" && !f.Guarded:
				t.Fatalf("%s not guarded: %s", c.node, got)
			case c.problem != "" && (f.Guarded || !strings.Contains(got, c.problem) || len(f.Problems) != 1):
				t.Fatalf("%s: guarded %v, problems %q, want only %q", c.node, f.Guarded, got, c.problem)
			case c.problem != "" && f.Fix == "":
				t.Fatalf("%s: no fix named", c.node)
			}
		})
	}
}

func TestUnclassifiedNodesFailTheAuditUnlessAccepted(t *testing.T) {
	a := &Audit{Findings: []Finding{
		{Node: "Ticket", Classification: Classification{Effect: Unclassified}},
		{Node: "Post", Classification: Classification{Effect: Write}},
		{Node: "Guarded post", Classification: Classification{Effect: Write}, Guarded: true},
	}}
	if n := a.Unguarded(false); n != 2 {
		t.Fatalf("Unguarded(false) = %d, want the write and the unclassified node", n)
	}
	if n := a.Unguarded(true); n != 1 {
		t.Fatalf("Unguarded(true) = %d, want the write only", n)
	}
}
