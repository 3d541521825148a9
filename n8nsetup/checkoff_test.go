package n8nsetup

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// check lists as silent a workflow that holds a guarded write and is off
// (not published on 2.x, not active on 1.x) although n8n ran it on its
// triggers before: what n8n does after repeated crashed executions,
// without calling the error workflow. One never run (an example setup
// installed unpublished) is a note.
func TestCheckListsGuardedWorkflowsThatAreOff(t *testing.T) {
	for _, c := range []struct {
		name       string
		major      int
		published  bool
		runs       []string
		runsStatus int
		silent     string // "" for not silent
		note       string // "" for no note about it
	}{
		{name: "published", major: 2, published: true, runs: []string{"webhook"}},
		{name: "unpublished after production runs (2.x)", major: 2, runs: []string{"manual", "webhook", "webhook"}, silent: "is not published although it ran on its triggers before"},
		{name: "inactive after production runs (1.x)", major: 1, runs: []string{"trigger"}, silent: "is not active although it ran"},
		{name: "never run on its triggers", major: 2, runs: []string{"manual"}, note: "never run on its triggers"},
		{name: "the key cannot list executions", major: 2, runsStatus: http.StatusForbidden, note: "cannot be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, inst := newInstance(t, c.major)
			in.importShipped(t, workflows.ErrorHandlerID)
			in.importShipped(t, leadToCRM)
			w := in.workflow(leadToCRM)
			if len(w.GuardedWrites()) == 0 {
				t.Fatal("the lead example holds no guarded write")
			}
			if !c.published {
				w.Active, w.ActiveVersionID = false, nil
			}
			in.runs = map[string][]string{leadToCRM: c.runs}
			in.runsStatus = c.runsStatus
			rep, err := inst.Check(context.Background(), n8n.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			var silent []string
			for _, s := range rep.Silent {
				if s.ID == leadToCRM && strings.Contains(s.Why, "guarded write") {
					silent = append(silent, s.Why)
				}
			}
			if got := strings.Join(silent, "\n"); (c.silent == "") != (got == "") || !strings.Contains(got, c.silent) {
				t.Errorf("silent %q, want %q", silent, c.silent)
			}
			if got := noted(rep, "holds a guarded write"); got != (c.note != "") || (got && !noted(rep, c.note)) {
				t.Errorf("notes %+v, want one saying %q", rep.Steps, c.note)
			}
		})
	}
}
