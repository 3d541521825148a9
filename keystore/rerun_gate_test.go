package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A key at its re-run gate is written only after a person's grant,
// whichever reserve reaches it: every kind of reserve against every stage
// of a failed, retryable key's re-run, straight through DecideReserve.
func TestAKeyAtItsGateIsWrittenOnlyAfterAGrant(t *testing.T) {
	const gated = "n8n wf1 exec 41"
	ns, key := "crm-contacts", "evt_1"
	// at builds the key failed at attempt 1, its execution at the gate,
	// then each of then in turn.
	at := func(t *testing.T, then ...func(*keystore.Record, time.Time) keystore.Step) *keystore.Record {
		t.Helper()
		f := failedWith(t, keystore.ReasonDestinationFailed)
		gate := must(t)(keystore.DecideReserve(f.cur, nil, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: gated, Rerun: true}, fpA, toUnk, t0))
		if gate.Result.Outcome != keystore.OutcomeRerunNotGranted || gate.Record == nil {
			t.Fatalf("building the fixture: the gate answered %s", gate.Result.Outcome)
		}
		cur := gate.Record
		for i, f := range then {
			cur = f(cur, t0.Add(time.Duration(i+1)*time.Millisecond)).Record
		}
		return cur
	}
	resolve := func(rerun bool) func(*keystore.Record, time.Time) keystore.Step {
		return func(cur *keystore.Record, at time.Time) keystore.Step {
			return must(t)(keystore.DecideResolve(cur, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateFailed, Rerun: rerun, By: "ann", Note: "crm back"}, toUnk, at))
		}
	}
	claim := func(cur *keystore.Record, at time.Time) keystore.Step {
		st, _ := keystore.DecideClaimRerun(cur, "guard-a", time.Minute, 10*time.Minute, at)
		return st
	}
	note := func(ev keystore.HistoryEvent) func(*keystore.Record, time.Time) keystore.Step {
		return func(cur *keystore.Record, at time.Time) keystore.Step {
			st, _, _ := keystore.DecideNoteRerun(cur, ev, "58", at)
			return st
		}
	}
	stages := map[string]func(t *testing.T) *keystore.Record{
		"failed, at no gate": func(t *testing.T) *keystore.Record { return failedWith(t, keystore.ReasonDestinationFailed).cur },
		"at its gate":        func(t *testing.T) *keystore.Record { return at(t) },
		"granted":            func(t *testing.T) *keystore.Record { return at(t, resolve(true)) },
		"starting":           func(t *testing.T) *keystore.Record { return at(t, resolve(true), claim) },
		"started": func(t *testing.T) *keystore.Record {
			return at(t, resolve(true), claim, note(keystore.HistoryRerunStarted))
		},
		"refused by n8n": func(t *testing.T) *keystore.Record {
			return at(t, resolve(true), claim, note(keystore.HistoryRerunRefused))
		},
		"allowed, no re-run": func(t *testing.T) *keystore.Record { return at(t, resolve(false)) },
	}
	reserves := map[string]keystore.ReserveRequest{
		// n8n runs the gated execution again from its start (its API's
		// Retry of an execution still running at the gate): its first
		// reserve has no rerun, and the execution has a new id or the same.
		"the gated execution from its start":       {Owner: gated},
		"n8n's retry of it from its start":         {Owner: "n8n wf1 exec 58"},
		"a copy the source sends":                  {Owner: "webhook"},
		"the gate again":                           {Owner: gated, Rerun: true},
		"another execution's gate":                 {Owner: "n8n wf1 exec 59", Rerun: true},
		"a copy with a request_id, for its replay": {Owner: "webhook", RequestID: "r-1"},
	}
	// What each reserve gets at each stage: accepted starts attempt 2.
	want := map[string]keystore.Outcome{
		"failed, at no gate": keystore.OutcomeAccepted, // a gate's own first call is refused: below
		"at its gate":        keystore.OutcomeRerunNotGranted,
		"granted":            keystore.OutcomeAccepted,
		"starting":           keystore.OutcomeAccepted,
		"started":            keystore.OutcomeAccepted,
		"refused by n8n":     keystore.OutcomeRerunNotGranted,
		"allowed, no re-run": keystore.OutcomeAccepted,
	}
	for stage, build := range stages {
		for name, req := range reserves {
			t.Run(stage+"/"+name, func(t *testing.T) {
				cur := build(t)
				req.Namespace, req.Key = ns, key
				st, err := keystore.DecideReserve(cur, nil, req, fpA, toUnk, now)
				if err != nil {
					t.Fatal(err)
				}
				w := want[stage]
				if stage == "failed, at no gate" && req.Rerun {
					w = keystore.OutcomeRerunNotGranted // the gate's first call
				}
				if st.Result.Outcome != w {
					t.Fatalf("%s: %s, want %s", stage, st.Result.Outcome, w)
				}
				switch {
				case w == keystore.OutcomeAccepted:
					if st.Record == nil || st.Record.State != keystore.StateReserved || st.Record.Attempt != 2 || !st.Result.Proceed {
						t.Fatalf("accepted without attempt 2: %+v", st.Record)
					}
				case !req.Rerun || req.Owner == gated && stage == "at its gate":
					// Refused and nothing written: not a gate, or the gate
					// again (recorded once per execution).
					if st.Record != nil || st.Result.Proceed || st.Result.Token != "" {
						t.Fatalf("a refused reserve wrote %+v (proceed %v)", st.Record, st.Result.Proceed)
					}
				default:
					// A gate's first call records where its execution waits.
					if last := keystore.LastTransition(st.Record); last == nil || last.Event != keystore.HistoryRerunGate || last.By != req.Owner {
						t.Fatalf("a gate's first call recorded %+v", last)
					}
					if st.Record.State != keystore.StateFailed || st.Result.Proceed {
						t.Fatalf("a gate's refusal moved the key: %s proceed %v", st.Record.State, st.Result.Proceed)
					}
				}
			})
		}
	}
}
