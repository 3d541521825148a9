package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/notify"
)

// A failure at the re-run gate of `n8n guard` is a write that failed with
// nothing written and an execution waiting to be re-run: the message says
// so and what to press, before the runbook; any other failure does not.
func TestAFailureAtTheRerunGateSaysWhatToDo(t *testing.T) {
	text := func(node string, canRetry bool) string {
		r := &notify.Record{}
		r.Kind, r.Runbook = notify.KindWorkflowFailed, "Check the CRM."
		r.WorkflowName, r.Node, r.ExecutionID = "leads", node, "42"
		b, err := json.Marshal(renderWorkflowFailed(r, "<@U1>", canRetry).Blocks)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	got := text("n8n-guard: re-run gate for Create contact", true)
	for _, want := range []string{"*Create contact* failed and nothing was written: the execution waits at its re-run gate.", "press *Retry execution*", "Check the CRM."} {
		if !strings.Contains(got, want) {
			t.Errorf("the message of a failure at the gate lacks %q:\n%s", want, got)
		}
	}
	// Without n8n's API the guard cannot re-run (501): a plain "allow a
	// retry" lets n8n's own Retry through the gate.
	got = text("n8n-guard: re-run gate for Create contact", false)
	if !strings.Contains(got, "allow a retry of its key in the n8n-guard console, then press *Retry* on the execution in n8n.") {
		t.Errorf("without n8n's API the message does not say to allow a retry, then retry in n8n:\n%s", got)
	}
	if strings.Contains(got, "press *Retry execution*") || strings.Contains(got, "re-run of its key") {
		t.Errorf("without n8n's API the message names a button or a re-run it does not have:\n%s", got)
	}
	if got := text("Create contact", true); strings.Contains(got, "re-run gate") {
		t.Errorf("a failure elsewhere speaks of a re-run gate:\n%s", got)
	}
}
