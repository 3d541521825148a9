package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A person's maintenance window is in the event log with who and why, set
// and ended early, and is told apart from an outage's opening and from a
// reset (the audit list reads it).
func TestMaintenanceWindowsAreInTheEventLog(t *testing.T) {
	now := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	b := &keystore.Breaker{Destination: "hubspot", State: keystore.BreakerClosed}
	set, err := keystore.DecideHoldDestination(b, "ana@example.com", "HubSpot upgrade, OPS-12", now.Add(3*time.Hour), now)
	if err != nil || len(set.Events) != 1 {
		t.Fatalf("hold: %+v %v", set, err)
	}
	ended, err := keystore.DecideEndHold(set.Breaker, "ben@example.com", "finished early", now.Add(time.Hour))
	if err != nil || len(ended.Events) != 1 {
		t.Fatalf("end: %+v %v", ended, err)
	}
	reset, err := keystore.DecideResetBreaker(set.Breaker, true, "ana@example.com", "status page: resolved", now)
	if err != nil {
		t.Fatal(err)
	}
	outage := keystore.Event{Kind: keystore.EventBreakerOpened, Destination: "hubspot", Message: "3 failures in a row"}
	for _, tc := range []struct {
		name          string
		ev            keystore.Event
		by, reason    string
		ended, window bool
	}{
		{"a window set", set.Events[0], "ana@example.com", "HubSpot upgrade, OPS-12", false, true},
		{"a window ended early", ended.Events[0], "ben@example.com", "finished early", true, true},
		{"an outage's opening", outage, "", "", false, false},
		{"a reset", reset.Events[0], "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			by, reason, end, ok := keystore.MaintenanceOf(tc.ev)
			if by != tc.by || reason != tc.reason || end != tc.ended || ok != tc.window {
				t.Errorf("MaintenanceOf = %q %q ended %v ok %v, want %q %q %v %v", by, reason, end, ok, tc.by, tc.reason, tc.ended, tc.window)
			}
		})
	}
	if !containsKind(keystore.DecisionKinds, keystore.EventMaintenanceEnded) || !containsKind(keystore.DecisionKinds, keystore.EventBreakerOpened) {
		t.Errorf("the audit's kinds %v leave windows out", keystore.DecisionKinds)
	}
}

func containsKind(kinds []keystore.EventKind, k keystore.EventKind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}
