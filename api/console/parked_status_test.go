package console

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A key resumed but never reserved again within its namespace's
// parked_limit is shown overdue, not "waiting for the execution": its
// execution is not coming back by itself.
func TestParkedResumedKeyPastParkedLimitIsOverdue(t *testing.T) {
	ui := &Console{policies: keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"crm": {ParkedLimit: time.Hour}}}}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sent := t0.Add(time.Minute)
	r := &keystore.Record{Namespace: "crm", Key: "evt_1", State: keystore.StateParked, ParkedAt: &t0, ResumeSentAt: &sent}
	resumed, overdue := string(keystore.PhaseResumed), keystore.StageWordsOverdue
	if got := ui.keyWords(r, t0.Add(30*time.Minute)).Stage; got != resumed {
		t.Errorf("within parked_limit: %s, want %s", got, resumed)
	}
	if got := ui.keyWords(r, t0.Add(2*time.Hour)).Stage; got != overdue {
		t.Errorf("past parked_limit: %s, want %s", got, overdue)
	}
	r.ResumeSentAt = nil
	if got := ui.keyWords(r, t0.Add(2*time.Hour)).Stage; got != overdue {
		t.Errorf("never resumed, past parked_limit: %s, want %s", got, overdue)
	}
}
