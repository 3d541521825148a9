package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A re-run asked of n8n for hours (n8n down, every claim going stale; or
// a re-run n8n starts that never reserves the key) keeps the gate that
// names the execution and the grant that names who allowed it, however
// short the history is kept.
func TestAReRunAskedForHoursKeepsItsGateAndGrant(t *testing.T) {
	at := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	rec := &keystore.Record{Namespace: "crm", Key: "lead-1", State: keystore.StateFailed, Retryable: true, Attempt: 1}
	for i := range keystore.MaxHistory {
		rec.History = append(rec.History, keystore.Transition{At: at.Add(time.Duration(i) * time.Second), Event: keystore.HistoryReserved})
	}
	rec.History = append(rec.History,
		keystore.Transition{At: at.Add(time.Minute), Event: keystore.HistoryRerunGate, By: "n8n wf1 exec 41"},
		keystore.Transition{At: at.Add(2 * time.Minute), Event: keystore.HistoryRerunGranted, By: "ann@example.com"})
	rec.History = rec.History[len(rec.History)-keystore.MaxHistory:]
	now := at.Add(3 * time.Minute)
	claim, started := 2*time.Minute, 10*time.Minute

	// n8n does not answer: every claim goes stale and is taken again.
	for range 30 {
		st, ok := keystore.DecideClaimRerun(rec, "guard-a", claim, started, now)
		if !ok {
			t.Fatalf("a stale claim was not taken again at %s: %+v", now, keystore.LastTransition(rec))
		}
		rec, now = st.Record, now.Add(claim)
	}
	starting := 0
	for _, h := range rec.History {
		if h.Event == keystore.HistoryRerunStarting {
			starting++
		}
	}
	if starting != 1 {
		t.Errorf("30 stale claims left %d claim entries, want 1 (taken again in place)", starting)
	}
	// n8n starts re-runs that never reserve the key: asked again and again.
	for i := range 15 {
		st, _, err := keystore.DecideNoteRerun(rec, keystore.HistoryRerunStarted, "9"+string(rune('0'+i%10)), now)
		if err != nil || st.Record == nil {
			t.Fatalf("noting a started re-run: %v", err)
		}
		rec, now = st.Record, now.Add(started)
		if st, ok := keystore.DecideClaimRerun(rec, "guard-a", claim, started, now); ok {
			rec = st.Record
		} else {
			t.Fatalf("a stale started re-run was not asked again")
		}
	}
	if len(rec.History) > keystore.MaxHistory {
		t.Errorf("history grew to %d entries", len(rec.History))
	}
	if holder, granted := keystore.RerunGranted(rec); !granted || holder != "n8n wf1 exec 41" {
		t.Errorf("after hours of asking: granted %v, execution %q; want the gate's execution", granted, holder)
	}
	var grant *keystore.Transition
	for i, h := range rec.History {
		if h.Event == keystore.HistoryRerunGranted {
			grant = &rec.History[i]
		}
		if i > 0 && h.At.Before(rec.History[i-1].At) {
			t.Errorf("history out of order at %d: %v", i, rec.History)
		}
	}
	if grant == nil || grant.By != "ann@example.com" {
		t.Errorf("who allowed the re-run is gone from the history: %+v", rec.History)
	}
}
