package keystore_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A re-run's claim is kept by its holder while n8n is asked and handed
// back when n8n was not asked: every (claim, event) pair.
func TestRerunClaimExtendAndRelease(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	claimedAt := t0.Add(time.Minute)
	history := func(tail ...keystore.Transition) *keystore.Record {
		h := []keystore.Transition{{At: t0, Event: keystore.HistoryRerunGate, By: "n8n wf1 exec 42"}, {At: t0, Event: keystore.HistoryRerunGranted, By: "Ana"}}
		return &keystore.Record{Namespace: "crm", Key: "evt_1", State: keystore.StateFailed, Retryable: true, History: append(h, tail...)}
	}
	claim := keystore.Transition{At: claimedAt, Event: keystore.HistoryRerunStarting, By: "guard-a"}
	started := keystore.Transition{At: t0, Event: keystore.HistoryRerunStarted, Detail: "57"}
	ack := keystore.Transition{At: claimedAt.Add(time.Second), Event: keystore.HistoryAcknowledged, By: "Bo"}
	now := claimedAt.Add(90 * time.Second)
	for _, c := range []struct {
		name     string
		rec      *keystore.Record
		by       string
		at       time.Time
		extended bool
		// released: the last entry that is no acknowledgement after a hand-back ("": refused)
		released keystore.HistoryEvent
	}{
		{"own claim", history(claim), "guard-a", claimedAt, true, keystore.HistoryRerunGranted},
		{"own claim, named to the millisecond", history(claim), "guard-a", claimedAt.Add(300 * time.Microsecond), true, keystore.HistoryRerunGranted},
		{"own claim of a started re-run asked again", history(started, claim), "guard-a", claimedAt, true, keystore.HistoryRerunStarted},
		{"own claim, acknowledged since", history(claim, ack), "guard-a", claimedAt, true, keystore.HistoryRerunGranted},
		{"another guard's claim", history(claim), "guard-b", claimedAt, false, ""},
		{"a claim since taken again", history(claim), "guard-a", claimedAt.Add(-time.Minute), false, ""},
		{"granted, not claimed", history(), "guard-a", claimedAt, false, ""},
		{"n8n's answer noted", history(claim, keystore.Transition{At: now, Event: keystore.HistoryRerunStarted, Detail: "57"}), "guard-a", claimedAt, false, ""},
		{"n8n refused", history(claim, keystore.Transition{At: now, Event: keystore.HistoryRerunRefused}), "guard-a", claimedAt, false, ""},
		{"the re-run reserved the key", func() *keystore.Record {
			r := history(claim)
			r.State = keystore.StateReserved
			return r
		}(), "guard-a", claimedAt, false, ""},
		{"no key", nil, "guard-a", claimedAt, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, ok := keystore.DecideExtendRerunClaim(c.rec, c.by, c.at, now)
			if ok != c.extended || (st.Record != nil) != ok {
				t.Fatalf("extend: %v (record %v), want %v", ok, st.Record != nil, c.extended)
			}
			if ok {
				if l := keystore.LastTransition(st.Record); l.Event != keystore.HistoryRerunStarting || !l.At.Equal(now) || len(st.Record.History) != len(c.rec.History) {
					t.Fatalf("extended: %+v of %d entries, want the claim dated %v", l, len(st.Record.History), now)
				}
				if keystore.LastTransition(c.rec).At != claimedAt {
					t.Fatal("extend changed the record it was given")
				}
				// Never dated back: a guard whose clock is behind.
				back, _ := keystore.DecideExtendRerunClaim(c.rec, c.by, c.at, claimedAt.Add(-time.Second))
				if l := keystore.LastTransition(back.Record); !l.At.Equal(claimedAt) {
					t.Fatalf("extended with an earlier clock to %v, want it kept at %v", l.At, claimedAt)
				}
			}
			st, ok = keystore.DecideReleaseRerunClaim(c.rec, c.by, c.at, now)
			if ok != (c.released != "") || (st.Record != nil) != ok {
				t.Fatalf("release: %v, want %v", ok, c.released != "")
			}
			if ok {
				if l := keystore.LastTransition(st.Record); l.Event != c.released || len(st.Record.History) != len(c.rec.History)-1 {
					t.Fatalf("released: last %+v of %d entries, want %s and the claim's entry gone", l, len(st.Record.History), c.released)
				}
				if keystore.StageOf(st.Record) != keystore.StageOf(&keystore.Record{State: keystore.StateFailed, Retryable: true, History: []keystore.Transition{{Event: c.released}}}) {
					t.Fatalf("stage after the hand-back: %s", keystore.StageOf(st.Record))
				}
			}
		})
	}
}

// When a granted re-run may be claimed: at once when nobody claimed it,
// a claim or a started re-run once stale; never without a grant. The
// claim's decision agrees, a moment before and at that time.
func TestRerunClaimableAt(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	const claim, started = time.Minute, 10 * time.Minute
	rec := func(tail ...keystore.Transition) *keystore.Record {
		h := []keystore.Transition{{At: t0, Event: keystore.HistoryRerunGate, By: "n8n wf1 exec 42"}}
		return &keystore.Record{Namespace: "crm", Key: "evt_1", State: keystore.StateFailed, Retryable: true, History: append(h, tail...)}
	}
	granted := keystore.Transition{At: t0, Event: keystore.HistoryRerunGranted, By: "Ana"}
	ack := keystore.Transition{At: t0.Add(time.Hour), Event: keystore.HistoryAcknowledged, By: "Bo"}
	for _, c := range []struct {
		name    string
		rec     *keystore.Record
		at      time.Time
		granted bool
	}{
		{"granted", rec(granted), time.Time{}, true},
		{"claimed", rec(granted, keystore.Transition{At: t0, Event: keystore.HistoryRerunStarting}), t0.Add(claim), true},
		{"claimed, acknowledged since", rec(granted, keystore.Transition{At: t0, Event: keystore.HistoryRerunStarting}, ack), t0.Add(claim), true},
		{"started by n8n", rec(granted, keystore.Transition{At: t0, Event: keystore.HistoryRerunStarted}), t0.Add(started), true},
		{"at its gate, not granted", rec(), time.Time{}, false},
		{"refused by n8n", rec(granted, keystore.Transition{At: t0, Event: keystore.HistoryRerunRefused}), time.Time{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			at, ok := keystore.RerunClaimableAt(c.rec, claim, started)
			if ok != c.granted || !at.Equal(c.at) {
				t.Fatalf("claimable at %v (granted %v), want %v (%v)", at, ok, c.at, c.granted)
			}
			if _, claimed := keystore.DecideClaimRerun(c.rec, "guard-a", claim, started, c.at.Add(-time.Millisecond)); claimed && !c.at.IsZero() {
				t.Error("claimed before it was claimable")
			}
			if _, claimed := keystore.DecideClaimRerun(c.rec, "guard-a", claim, started, c.at); claimed != c.granted {
				t.Errorf("claimed at its time: %v, want %v", claimed, c.granted)
			}
		})
	}
}
