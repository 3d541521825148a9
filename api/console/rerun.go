package console

import (
	"cmp"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Re-runs in the console: a failed, retryable key whose execution waits
// at its re-run gate (keystore.RerunHolder) offers "allow a retry and
// re-run execution N in n8n" on its page and in a bulk decision. The
// grant is keystore's Resolve with rerun; Config.Reruns then wakes the
// runner, which asks n8n to retry the execution. Without Config.Reruns
// nothing is offered and a form that asks anyway is refused.

// actionRerun is the form's action of a re-run, on the key and bulk pages.
const actionRerun = "rerun"

// errNoReruns refuses a re-run on a guard without n8n's API.
var errNoReruns = errs.Errorf(errs.Unsupported,
	"this guard cannot re-run n8n executions (N8N_API_URL and N8N_API_KEY are not set): allow a retry without re-run; nothing changed")

// keyRerun is where the key's re-run stands, as its page shows it.
type keyRerun struct {
	// AtGate: an execution waits at the key's re-run gate (or n8n
	// refused its re-run): a plain retry of it in n8n stops there again.
	AtGate bool
	// Offer: a person may allow a re-run now (an execution waits at the
	// gate, or n8n refused the last re-run, and this guard can re-run).
	Offer bool
	// Execution is the one at the gate (or the one granted), and its
	// page in n8n ("" : n8n's address is unknown).
	Execution    holder
	ExecutionURL string
	// GrantedBy allowed the re-run, which no reserve took yet ("": not
	// granted).
	GrantedBy string
	// StartedAs is the execution n8n started for it ("": not yet).
	StartedAs, StartedURL string
	// Refused is n8n's answer when it refused the last re-run.
	Refused string
}

func (ui *Console) keyRerun(r *keystore.Record) keyRerun {
	var v keyRerun
	base := ui.n8nBase(r)
	link := func(h holder) string {
		l := n8nLinksOf(base, h)
		return cmp.Or(l.Execution, l.Executions)
	}
	if h := keystore.RerunHolder(r); h != "" {
		v.AtGate, v.Offer = true, ui.reruns != nil
		v.Execution = parseHolder(h)
	}
	if h, granted := keystore.RerunGranted(r); granted {
		v.Execution = parseHolder(h)
		v.GrantedBy = lastBy(r, keystore.HistoryRerunGranted)
		if id := keystore.RerunStartedAs(r); id != "" {
			v.StartedAs = id
			v.StartedURL = link(holder{WorkflowID: v.Execution.WorkflowID, ExecutionID: id})
		}
	}
	if n := len(r.History); n > 0 && r.History[n-1].Event == keystore.HistoryRerunRefused {
		v.Refused = r.History[n-1].Detail
	}
	v.ExecutionURL = link(v.Execution)
	return v
}

// lastBy is who wrote the key's newest history entry of event.
func lastBy(r *keystore.Record, event keystore.HistoryEvent) string {
	for i := len(r.History) - 1; i >= 0; i-- {
		if r.History[i].Event == event {
			return r.History[i].By
		}
	}
	return ""
}
