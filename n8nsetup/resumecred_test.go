package n8nsetup

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// instance is a fake n8n that keeps what the public API saves: workflows
// (with a saved and a published version, as 2.x) and credentials (which
// 1.x's API can create but not list). What setup and check do to it is
// read back from its state, as from a real n8n (e2e/park_test.go runs the
// shipped workflows in one).
type instance struct {
	major int
	mu    sync.Mutex
	next  int
	wfs   []*n8n.Workflow
	creds []Credential
	data  map[string]map[string]any // credential id → its data
	saves int
	// failed are the failed executions GET /executions?status=error
	// answers, newest first, with their data.
	failed []map[string]any
	// runs are the modes of each workflow's newest executions (GET
	// /executions?workflowId=); runsStatus, when set, is n8n's refusal.
	runs       map[string][]string
	runsStatus int
}

func newInstance(t *testing.T, major int) (*instance, *Instance) {
	t.Helper()
	in := &instance{major: major, data: map[string]map[string]any{}}
	srv := httptest.NewServer(http.HandlerFunc(in.handle))
	t.Cleanup(srv.Close)
	v := n8n.Version{Major: major, Minor: 113, Patch: 3, Exact: major < 2}
	return in, &Instance{Client: n8n.New(srv.URL, "key", 0), Version: v}
}

func (in *instance) handle(w http.ResponseWriter, r *http.Request) {
	in.mu.Lock()
	defer in.mu.Unlock()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v1")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && path == "/workflows":
		reply(200, map[string]any{"data": in.wfs, "nextCursor": nil})
	case r.Method == http.MethodPost && path == "/workflows":
		var b WorkflowBody
		_ = json.NewDecoder(r.Body).Decode(&b)
		in.next++
		wf := &n8n.Workflow{ID: fmt.Sprintf("W%d", in.next), Name: b.Name, Nodes: b.Nodes, Connections: b.Connections, Settings: b.Settings, VersionID: fmt.Sprintf("v%d", in.next)}
		in.wfs = append(in.wfs, wf)
		reply(200, wf)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "workflows":
		reply(200, in.workflow(parts[1]))
	case r.Method == http.MethodPut && len(parts) == 2 && parts[0] == "workflows":
		wf := in.workflow(parts[1])
		var b WorkflowBody
		_ = json.NewDecoder(r.Body).Decode(&b)
		in.next++
		in.saves++
		wf.Nodes, wf.Connections, wf.Settings, wf.VersionID = b.Nodes, b.Connections, b.Settings, fmt.Sprintf("v%d", in.next)
		if wf.Active && (in.major < 2 || r.URL.Query().Get("publishIfActive") == "true") {
			v := wf.VersionID
			wf.ActiveVersionID = &v
		}
		reply(200, wf)
	case r.Method == http.MethodPost && len(parts) == 3 && (parts[2] == "publish" || parts[2] == "activate"):
		wf := in.workflow(parts[1])
		v := wf.VersionID
		wf.Active, wf.ActiveVersionID = true, &v
		reply(200, wf)
	case r.Method == http.MethodGet && path == "/executions" && r.URL.Query().Get("status") == "error":
		reply(200, map[string]any{"data": in.failed, "nextCursor": nil})
	case r.Method == http.MethodGet && path == "/executions" && r.URL.Query().Get("workflowId") != "":
		if in.runsStatus != 0 {
			reply(in.runsStatus, map[string]any{"message": "Forbidden"})
			return
		}
		var data []map[string]any
		for i, m := range in.runs[r.URL.Query().Get("workflowId")] {
			data = append(data, map[string]any{"id": fmt.Sprint(i + 1), "mode": m, "workflowId": r.URL.Query().Get("workflowId")})
		}
		reply(200, map[string]any{"data": data, "nextCursor": nil})
	case r.Method == http.MethodGet && path == "/credentials" && in.major >= 2:
		reply(200, map[string]any{"data": in.creds, "nextCursor": nil})
	case r.Method == http.MethodPost && path == "/credentials":
		var b struct {
			Name, Type string
			Data       map[string]any
		}
		_ = json.NewDecoder(r.Body).Decode(&b)
		in.next++
		c := Credential{ID: fmt.Sprintf("C%d", in.next), Name: b.Name, Type: b.Type}
		in.creds = append(in.creds, c)
		in.data[c.ID] = b.Data
		reply(200, c)
	default:
		reply(404, map[string]any{"message": "not found"})
	}
}

func (in *instance) workflow(id string) *n8n.Workflow {
	for _, w := range in.wfs {
		if w.ID == id {
			return w
		}
	}
	return &n8n.Workflow{}
}

// importShipped puts a shipped workflow in as a user's import does (the
// ids of the file kept) and publishes it.
func (in *instance) importShipped(t *testing.T, id string) {
	t.Helper()
	shipped, err := workflows.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	for _, wf := range shipped {
		if wf.ID == id {
			v := "v0"
			in.wfs = append(in.wfs, &n8n.Workflow{ID: wf.ID, Name: wf.Name, Nodes: wf.Nodes, Connections: wf.Connections, Settings: wf.Settings,
				Active: true, VersionID: v, ActiveVersionID: &v})
			return
		}
	}
	t.Fatalf("no shipped workflow %s", id)
}

// waitCredential is the credential id the Wait nodes of wf check (saved
// version), and how many Wait nodes check one.
func waitCredential(wf *n8n.Workflow) (ids []string) {
	for _, n := range wf.Nodes {
		if id, ok := workflows.UsesResumeCredential(n); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestSetupResumeCredential(t *testing.T) {
	for _, major := range []int{1, 2} {
		t.Run(fmt.Sprintf("n8n %d.x: the imported lead workflow gets the resume credential, once", major), func(t *testing.T) {
			ctx := context.Background()
			in, inst := newInstance(t, major)
			in.importShipped(t, "n8nGuardLeadCrm1")

			rep, err := inst.Check(ctx, n8n.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if !silentAbout(rep, "n8nGuardLeadCrm1", "placeholder credential") {
				t.Fatalf("check before setup: %+v, want the lead workflow's placeholder resume credential listed", rep.Silent)
			}

			opts := SetupOptions{GuardURL: "http://guard:8080", Token: "tok", ResumeSecret: "s3cret"}
			rep, err = inst.Setup(ctx, opts)
			if err != nil || rep.Err() != nil {
				t.Fatalf("setup: %v %v %+v", err, rep.Err(), rep.Steps)
			}
			var resume *Credential
			for i, c := range in.creds {
				if c.Name == workflows.ResumeCredentialName {
					resume = &in.creds[i]
				}
			}
			if resume == nil || resume.Type != workflows.CredentialType {
				t.Fatalf("credentials after setup: %+v, want %q (Header Auth)", in.creds, workflows.ResumeCredentialName)
			}
			if d := in.data[resume.ID]; d["name"] != workflows.ResumeHeader || d["value"] != "s3cret" {
				t.Fatalf("resume credential data %v, want header %s with the guard's secret", d, workflows.ResumeHeader)
			}
			lead := in.workflow("n8nGuardLeadCrm1")
			if ids := waitCredential(lead); len(ids) != 1 || ids[0] != resume.ID {
				t.Fatalf("the lead workflow's Wait nodes check %v, want [%s]", ids, resume.ID)
			}
			if lead.ActiveVersionID == nil || *lead.ActiveVersionID != lead.VersionID {
				t.Fatalf("the wiring of a published workflow without unpublished edits is not live: version %s published %v", lead.VersionID, lead.ActiveVersionID)
			}
			for _, n := range lead.Nodes {
				if id, ok := workflows.UsesCredential(n); ok && id == resume.ID {
					t.Fatalf("node %v calls the guard with the resume credential", n["name"])
				}
			}

			saves, creds := in.saves, len(in.creds)
			rep, err = inst.Setup(ctx, opts)
			if err != nil || rep.Changes() != 0 || in.saves != saves || len(in.creds) != creds {
				t.Fatalf("second setup: %v, %d changes %+v, %d saves and %d credentials more", err, rep.Changes(), rep.Steps, in.saves-saves, len(in.creds)-creds)
			}
			rep, err = inst.Check(ctx, n8n.Filter{})
			if err != nil || silentAbout(rep, "n8nGuardLeadCrm1", "") {
				t.Fatalf("check after setup: %v %+v", err, rep.Silent)
			}
		})
	}

	t.Run("without the guard's resume secret: NOT DONE, nothing wired", func(t *testing.T) {
		in, inst := newInstance(t, 2)
		in.importShipped(t, "n8nGuardBooking1")
		rep, err := inst.Setup(context.Background(), SetupOptions{GuardURL: "http://guard:8080", Token: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Err() == nil || !notDone(rep, "--create-credential") {
			t.Fatalf("setup without a resume secret: %+v, want NOT DONE naming --create-credential", rep.Steps)
		}
		if ids := waitCredential(in.workflow("n8nGuardBooking1")); len(ids) != 1 || ids[0] != workflows.ResumeCredentialID {
			t.Fatalf("Wait nodes check %v, want the untouched placeholder", ids)
		}
	})

	t.Run("no workflow parks: no resume credential is asked for", func(t *testing.T) {
		in, inst := newInstance(t, 2)
		rep, err := inst.Setup(context.Background(), SetupOptions{GuardURL: "http://guard:8080", Token: "tok"})
		if err != nil || rep.Err() != nil {
			t.Fatalf("setup: %v %+v", err, rep.Steps)
		}
		for _, c := range in.creds {
			if c.Name == workflows.ResumeCredentialName {
				t.Fatalf("a resume credential was created with nothing parking: %+v", in.creds)
			}
		}
	})

	t.Run("no workflow parks yet, the secret given: the credential is made for a later guard --park", func(t *testing.T) {
		in, inst := newInstance(t, 2)
		rep, err := inst.Setup(context.Background(), SetupOptions{GuardURL: "http://guard:8080", Token: "tok", ResumeSecret: "s3cret"})
		if err != nil || rep.Err() != nil {
			t.Fatalf("setup: %v %+v", err, rep.Steps)
		}
		made := 0
		for _, c := range in.creds {
			if c.Name == workflows.ResumeCredentialName && in.data[c.ID]["value"] == "s3cret" {
				made++
			}
		}
		if made != 1 {
			t.Fatalf("credentials %+v, want one %q with the secret", in.creds, workflows.ResumeCredentialName)
		}
	})

	t.Run("unpublished edits stay unpublished", func(t *testing.T) {
		in, inst := newInstance(t, 2)
		in.importShipped(t, "n8nGuardLeadCrm1")
		lead := in.workflow("n8nGuardLeadCrm1")
		lead.VersionID = "v0-draft" // saved after publishing
		rep, err := inst.Setup(context.Background(), SetupOptions{GuardURL: "http://guard:8080", Token: "tok", ResumeSecret: "s"})
		if err != nil || rep.Err() != nil {
			t.Fatalf("setup: %v %+v", err, rep.Steps)
		}
		if *lead.ActiveVersionID != "v0" || !noted(rep, "unpublished edits") {
			t.Fatalf("published version %s, steps %+v: want v0 kept and a note", *lead.ActiveVersionID, rep.Steps)
		}
	})
}

func TestCheckResumeCredential(t *testing.T) {
	in, inst := newInstance(t, 2)
	in.importShipped(t, "n8nGuardLeadCrm1")
	in.creds = append(in.creds, Credential{ID: "X1", Name: "someone's header", Type: workflows.CredentialType})
	for _, c := range []struct {
		name, id, want string
	}{
		{"a credential that does not exist", "gone", "does not exist"},
		{"another credential than the guard's", "X1", "not \"n8n-guard resume\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			workflows.PointResumeCredential(in.workflow("n8nGuardLeadCrm1").Nodes, c.id, "x")
			rep, err := inst.Check(context.Background(), n8n.Filter{})
			if err != nil || !silentAbout(rep, "n8nGuardLeadCrm1", c.want) {
				t.Fatalf("check: %v %+v, want the lead workflow listed: %s", err, rep.Silent, c.want)
			}
		})
	}
}

func silentAbout(rep *Report, id, why string) bool {
	for _, s := range rep.Silent {
		if s.ID == id && strings.Contains(s.Why, "Wait node") && strings.Contains(s.Why, why) {
			return true
		}
	}
	return false
}

func notDone(rep *Report, part string) bool {
	for _, s := range rep.Steps {
		if s.Kind == NotDone && strings.Contains(s.Text, part) {
			return true
		}
	}
	return false
}

func noted(rep *Report, part string) bool {
	for _, s := range rep.Steps {
		if s.Kind == Note && strings.Contains(s.Text, part) {
			return true
		}
	}
	return false
}
