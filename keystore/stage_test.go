package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// StageOf says what the Decide functions read: a parked key's phase
// (PhaseOf), a failed retryable key's re-run stage off its last entry that
// is not an acknowledgement (RerunHolder: at the gate or refused;
// RerunGranted: granted, starting, started), and nothing else.
func TestStageOfIsWhatTheDecisionsRead(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	failed := func(retryable bool, events ...keystore.HistoryEvent) *keystore.Record {
		r := &keystore.Record{Namespace: "crm", Key: "k", State: keystore.StateFailed, Retryable: retryable}
		for _, ev := range events {
			r.History = append(r.History, keystore.Transition{At: at, Event: ev, By: "n8n wf1 exec 42"})
		}
		return r
	}
	gate, granted, starting := keystore.HistoryRerunGate, keystore.HistoryRerunGranted, keystore.HistoryRerunStarting
	for name, c := range map[string]struct {
		r    *keystore.Record
		want keystore.Stage
	}{
		"nil":                           {nil, ""},
		"reserved":                      {&keystore.Record{State: keystore.StateReserved}, ""},
		"failed, no gate":               {failed(true, keystore.HistoryFailed), ""},
		"at the gate":                   {failed(true, keystore.HistoryFailed, gate), keystore.StageAtGate},
		"at the gate, acknowledged":     {failed(true, keystore.HistoryFailed, gate, keystore.HistoryAcknowledged, keystore.HistorySnoozed), keystore.StageAtGate},
		"at the gate, not retryable":    {failed(false, keystore.HistoryFailed, gate), ""},
		"granted":                       {failed(true, gate, granted), keystore.StageGranted},
		"starting":                      {failed(true, gate, granted, starting), keystore.StageStarting},
		"started":                       {failed(true, gate, granted, starting, keystore.HistoryRerunStarted), keystore.StageStarted},
		"refused":                       {failed(true, gate, granted, starting, keystore.HistoryRerunRefused), keystore.StageRefused},
		"resolved after the gate":       {failed(true, gate, keystore.HistoryResolved), ""},
		"parked":                        {&keystore.Record{State: keystore.StateParked, Reason: keystore.ReasonDestinationUnreachable}, keystore.PhaseWaiting},
		"parked, claimed":               {&keystore.Record{State: keystore.StateParked, ResumeClaimUntil: &at}, keystore.PhaseClaimed},
		"parked, resumed":               {&keystore.Record{State: keystore.StateParked, ResumeClaimUntil: &at, ResumeSentAt: &at}, keystore.PhaseResumed},
		"parked, lost after its resume": {&keystore.Record{State: keystore.StateParked, Reason: keystore.ReasonResumeLost, ResumeSentAt: &at}, keystore.PhaseLost},
		"approved, resumed":             {&keystore.Record{State: keystore.StateParked, Reason: keystore.ReasonApproved, ResumeSentAt: &at}, keystore.PhaseApproved},
		"rejected":                      {&keystore.Record{State: keystore.StateParked, Reason: keystore.ReasonApprovalRejected}, keystore.PhaseRejected},
		"awaiting approval":             {&keystore.Record{State: keystore.StateParked, Reason: keystore.ReasonAwaitingApproval}, keystore.PhaseAwaitingApproval},
	} {
		got := keystore.StageOf(c.r)
		if got != c.want {
			t.Errorf("%s: StageOf = %q, want %q", name, got, c.want)
		}
		if c.r == nil {
			continue
		}
		if c.r.State == keystore.StateParked && got != keystore.PhaseOf(c.r) {
			t.Errorf("%s: StageOf %q, PhaseOf %q", name, got, keystore.PhaseOf(c.r))
		}
		atGate := keystore.RerunHolder(c.r) != ""
		_, isGranted := keystore.RerunGranted(c.r)
		if atGate != (got == keystore.StageAtGate || got == keystore.StageRefused) || isGranted != (got == keystore.StageGranted || got == keystore.StageStarting || got == keystore.StageStarted) {
			t.Errorf("%s: stage %q, RerunHolder %v, RerunGranted %v", name, got, atGate, isGranted)
		}
		if got != "" && !keystore.ValidStage(got) {
			t.Errorf("%s: %q is not among keystore.Stages", name, got)
		}
	}
}
