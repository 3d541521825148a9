package workflows

import "testing"

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
}

func TestTemplate(t *testing.T) {
	for _, name := range []string{"config", "reserve", "complete", "fail", "lookup", "resolve"} {
		if _, err := Template(name); err != nil {
			t.Errorf("Template(%s): %v", name, err)
		}
	}
	if _, err := Template("nope"); err == nil {
		t.Error("Template(nope) found something")
	}
}
