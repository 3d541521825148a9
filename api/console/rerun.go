package console

import (
	"cmp"

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
		v.GrantedBy = r.LastBy(keystore.HistoryRerunGranted)
		if id := keystore.RerunStartedAs(r); id != "" {
			v.StartedAs = id
			v.StartedURL = link(holder{WorkflowID: v.Execution.WorkflowID, ExecutionID: id})
		}
	}
	if t := keystore.LastTransition(r); t != nil && t.Event == keystore.HistoryRerunRefused {
		v.Refused = t.Detail
	}
	v.ExecutionURL = link(v.Execution)
	return v
}
