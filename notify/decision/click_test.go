package decision

import (
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/notify"
)

// What a click asks for, state by action, straight through the pure
// functions of click.go (no outbox, no Slack in between), like notify's
// transitions_test.

var created = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// pending is a failed execution's notification, not delivered yet.
func pending() *notify.Record {
	return &notify.Record{Header: notify.Header{ID: "n_1", Kind: notify.KindWorkflowFailed, Status: notify.StatusPending, Count: 1, CreatedAt: created, FirstAt: created},
		Delivery: notify.Delivery{DueAt: created}, Failure: notify.Failure{ExecutionID: "77"}}
}

// keyGroup is a message about count keys, settled of them decided.
func keyGroup(count, settled int) *notify.Record {
	r := &notify.Record{Header: notify.Header{ID: "n_g", Kind: notify.KindKeyUnknown, Status: notify.StatusDelivered, Count: count},
		KeyPayload: notify.KeyPayload{Namespace: "ns", Key: "k1", KeyAttempt: 1}}
	r.Settled = settled
	return r
}

func TestDecideClick(t *testing.T) {
	key := func() *notify.Record {
		return &notify.Record{Header: notify.Header{ID: "n_k", Kind: notify.KindKeyUnknown}, KeyPayload: notify.KeyPayload{Namespace: "ns", Key: "k", KeyAttempt: 2}}
	}
	decided := func(mk func() *notify.Record, d string) func() *notify.Record {
		return func() *notify.Record { r := mk(); r.Decision, r.DecidedBy = d, "U1"; return r }
	}
	breaker := func() *notify.Record {
		return &notify.Record{Header: notify.Header{ID: "n_b", Kind: notify.KindBreakerOpened}}
	}
	states := map[string]func() *notify.Record{
		"failure": pending, "failure, snoozed": decided(pending, notify.DecisionSnoozed),
		"failure, acknowledged": decided(pending, notify.DecisionAcknowledged), "failure, retried": decided(pending, notify.DecisionRetried),
		"key": key, "key, acknowledged": decided(key, notify.DecisionAcknowledged), "key, completed": decided(key, notify.DecisionCompleted),
		"breaker": breaker,
	}
	const (
		taken   = "Already taken"
		notKey  = "not about a key"
		noRerun = "cannot retry executions"
		retried = "Already retried"
		unknown = "does not know this button"
	)
	table := map[string]map[string]string{ // action → decision, or the refusal's words
		"failure":               {notify.ActionAck: notify.DecisionAcknowledged, notify.ActionSnooze: notify.DecisionSnoozed, notify.ActionComplete: notKey, notify.ActionRetry: notKey, notify.ActionRerun: notify.DecisionRetried},
		"failure, snoozed":      {notify.ActionAck: notify.DecisionAcknowledged, notify.ActionSnooze: notify.DecisionSnoozed, notify.ActionComplete: notKey, notify.ActionRetry: notKey, notify.ActionRerun: notify.DecisionRetried},
		"failure, acknowledged": {notify.ActionAck: taken, notify.ActionSnooze: taken, notify.ActionComplete: notKey, notify.ActionRetry: notKey, notify.ActionRerun: notify.DecisionRetried},
		"failure, retried":      {notify.ActionAck: taken, notify.ActionSnooze: taken, notify.ActionComplete: notKey, notify.ActionRetry: notKey, notify.ActionRerun: retried},
		"key":                   {notify.ActionAck: notify.DecisionAcknowledged, notify.ActionSnooze: notify.DecisionSnoozed, notify.ActionComplete: notify.DecisionCompleted, notify.ActionRetry: notify.DecisionRetry, notify.ActionRerun: noRerun},
		// The keystore decides whether the key is still open (resolveKey).
		"key, acknowledged": {notify.ActionAck: taken, notify.ActionSnooze: taken, notify.ActionComplete: notify.DecisionCompleted, notify.ActionRetry: notify.DecisionRetry, notify.ActionRerun: noRerun},
		"key, completed":    {notify.ActionAck: taken, notify.ActionSnooze: taken, notify.ActionComplete: notify.DecisionCompleted, notify.ActionRetry: notify.DecisionRetry, notify.ActionRerun: noRerun},
		"breaker":           {notify.ActionAck: notify.DecisionAcknowledged, notify.ActionSnooze: notify.DecisionSnoozed, notify.ActionComplete: notKey, notify.ActionRetry: notKey, notify.ActionRerun: noRerun},
	}
	for sname, mk := range states {
		for _, action := range []string{notify.ActionAck, notify.ActionSnooze, notify.ActionComplete, notify.ActionRetry, notify.ActionRerun, "guard_other"} {
			t.Run(sname+" / "+action, func(t *testing.T) {
				want := table[sname][action]
				if action == "guard_other" {
					want = unknown
				}
				got := decideClick(mk(), action, true)
				switch {
				case got.Refusal == "" && got.Decision != want:
					t.Fatalf("decision %q, want %q", got.Decision, want)
				case got.Refusal != "" && !strings.Contains(got.Refusal, want):
					t.Fatalf("refusal %q, want %q", got.Refusal, want)
				}
			})
		}
	}
	if got := decideClick(pending(), notify.ActionRerun, false); !strings.Contains(got.Refusal, noRerun) {
		t.Fatalf("rerun without n8n's API: %+v", got)
	}
}

func TestStaleButtons(t *testing.T) {
	key := &notify.Record{Header: notify.Header{ID: "n_k", Kind: notify.KindKeyUnknown}, KeyPayload: notify.KeyPayload{KeyAttempt: 2}, Decided: notify.Decided{Version: 3}}
	cases := []struct {
		attempt, version int
		stale            bool
	}{
		{0, 0, false}, // an earlier guard's button says neither
		{2, 4, false}, // as rendered now
		{1, 4, true},  // another attempt
		{2, 3, true},  // an older version
		{2, 0, false},
	}
	for _, tc := range cases {
		if got := stale(key, tc.attempt, tc.version); got != tc.stale {
			t.Errorf("attempt %d version %d: stale %v", tc.attempt, tc.version, got)
		}
	}
	if id, a, v := parseButtonValue(ButtonValue(key)); id != "n_k" || a != 2 || v != 4 {
		t.Fatalf("button value round trip: %s %d %d", id, a, v)
	}
}

func TestGroupClick(t *testing.T) {
	cases := []struct {
		name     string
		cur      *notify.Record
		action   string
		version  int
		decision string
		refusal  string
	}{
		{"keys open: it happened", keyGroup(50, 5), notify.ActionComplete, 1, notify.DecisionCompleted, ""},
		{"keys open: it did not happen", keyGroup(50, 5), notify.ActionRetry, 1, notify.DecisionRetry, ""},
		{"keys open, a button without a version", keyGroup(50, 5), notify.ActionComplete, 0, notify.DecisionCompleted, ""},
		{"keys open, a button of an older version", keyGroup(50, 5), notify.ActionComplete, 7, "", "out of date"},
		{"none open: a late click", keyGroup(50, 50), notify.ActionComplete, 1, "", "All 50 keys of this group are decided already"},
		{"none open, an old button", keyGroup(50, 50), notify.ActionRetry, 7, "", "decided already"},
		{"an unknown button", keyGroup(50, 5), "guard_other", 1, "", "does not know this button"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := groupClick(tc.cur, tc.action, tc.version)
			if step.Decision != tc.decision || (tc.refusal == "") != (step.Refusal == "") || !strings.Contains(step.Refusal, tc.refusal) {
				t.Fatalf("%+v", step)
			}
		})
	}
}
