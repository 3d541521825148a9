package keystore

import (
	"strings"
	"testing"
	"time"
)

// Every stage of a key reads as its own words, told by the same fields
// the Decide functions read: a person sees where the key stands and
// whether it is theirs to act on.
func TestWordsOf(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	parked := func(edit func(r *Record)) *Record {
		r := &Record{Namespace: "crm", Key: "evt-1", State: StateParked, Destination: "hubspot", ParkedAt: at(0),
			ResumeURL: "http://n8n/webhook-waiting/81", History: []Transition{{At: t0, Event: HistoryParked}}}
		if edit != nil {
			edit(r)
		}
		return r
	}
	failed := func(events ...HistoryEvent) *Record {
		r := &Record{Namespace: "crm", Key: "lead-1", State: StateFailed, Retryable: true, Reason: ReasonDestinationUnreachable}
		for _, ev := range events {
			r.History = append(r.History, Transition{At: t0, Event: ev, By: "n8n lead-sync exec 42"})
		}
		return r
	}
	probe := &Breaker{Destination: "hubspot", State: BreakerHalfOpen, ProbeNamespace: "crm", ProbeKey: "evt-1"}
	hour := WordsAt{ParkedLimit: time.Hour, Now: t0.Add(30 * time.Minute)}
	late := WordsAt{ParkedLimit: time.Hour, Now: t0.Add(2 * time.Hour)}
	for _, tc := range []struct {
		name      string
		r         *Record
		at        WordsAt
		stage     string
		status    string
		attention bool
	}{
		{"parked, waiting", parked(nil), hour, "waiting", "waiting for the destination", false},
		{"parked, claimed", parked(func(r *Record) { r.ResumeClaimUntil = at(time.Minute) }), WordsAt{Now: t0}, "claimed", "being resumed", false},
		{"parked, the probe", parked(func(r *Record) { r.ResumeClaimUntil = at(time.Minute) }), WordsAt{Breaker: probe, Now: t0}, "probe", "being resumed as the probe", false},
		{"parked, resumed", parked(func(r *Record) { r.ResumeSentAt = at(time.Minute) }), hour, "resumed", "resumed", false},
		{"parked, resumed past parked_limit", parked(func(r *Record) { r.ResumeSentAt = at(time.Minute) }), late, "overdue", "overdue", true},
		{"parked, waiting past parked_limit", parked(nil), late, "overdue", "overdue", true},
		{"parked, recorded overdue (limit unknown to the reader)", parked(func(r *Record) {
			r.History = append(r.History, Transition{At: t0.Add(time.Hour), Event: HistoryParkedOverdue})
		}), WordsAt{Now: t0.Add(2 * time.Hour)}, "overdue", "overdue", true},
		{"parked, lost", parked(func(r *Record) { r.Reason = ReasonResumeLost }), late, "lost", "lost", true},
		{"parked, awaiting approval (never overdue: a person is asked already)", parked(func(r *Record) { r.Reason = ReasonAwaitingApproval }), late, "awaiting_approval", "awaiting approval", true},
		{"parked, approved and resumed", parked(func(r *Record) { r.Reason = ReasonApproved; r.ResumeSentAt = at(time.Minute) }), hour, "approved", "approved", false},
		{"parked, rejected", parked(func(r *Record) { r.Reason = ReasonApprovalRejected }), hour, "rejected", "rejected", false},
		{"failed at its re-run gate", failed(HistoryFailed, HistoryRerunGate), hour, "at_gate", "waiting at its re-run gate", true},
		{"re-run granted", failed(HistoryFailed, HistoryRerunGate, HistoryRerunGranted), hour, "granted", "re-run allowed", false},
		{"re-run starting", failed(HistoryFailed, HistoryRerunGate, HistoryRerunGranted, HistoryRerunStarting), hour, "starting", "asking n8n to re-run it", false},
		{"re-run started", failed(HistoryFailed, HistoryRerunGate, HistoryRerunGranted, HistoryRerunStarting, HistoryRerunStarted), hour, "started", "re-run started in n8n", false},
		{"re-run refused", failed(HistoryFailed, HistoryRerunGate, HistoryRerunGranted, HistoryRerunRefused), hour, "refused", "re-run refused by n8n", true},
		{"failed, retryable, no gate", failed(HistoryFailed), hour, "", "failed: a new attempt may start", false},
		{"failed for good", &Record{State: StateFailed, History: []Transition{{Event: HistoryRerunGate}}}, hour, "", "failed for good: no new attempt", false},
		{"unknown", &Record{State: StateUnknown, Reason: ReasonOutcomeUnknown}, hour, "", "unknown: a person must decide", true},
		{"completed", &Record{State: StateCompleted}, hour, "", "completed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := WordsOf(tc.r, tc.at)
			if w.Stage != tc.stage || w.Status != tc.status || w.Attention != tc.attention {
				t.Fatalf("WordsOf = %+v, want stage %q status %q attention %v", w, tc.stage, tc.status, tc.attention)
			}
			if tc.attention && w.Next == "" {
				t.Fatalf("a key a person must act on names no next step: %+v", w)
			}
			if strings.Contains(strings.ToLower(w.Next), "nothing to do") && tc.attention {
				t.Fatalf("a key a person must act on says nothing to do: %+v", w)
			}
		})
	}
}

// The words read the stage as the stored stage will: every parked phase
// and every re-run stage has its words, so no key reads as a bare code.
func TestEveryStageHasWords(t *testing.T) {
	for _, s := range []string{string(PhaseWaiting), string(PhaseClaimed), string(PhaseProbe), string(PhaseResumed), string(PhaseLost),
		string(PhaseAwaitingApproval), string(PhaseApproved), string(PhaseRejected), StageWordsOverdue,
		rerunAtGate, rerunGranted, rerunStarting, rerunStarted, rerunRefused} {
		if w := stageWords[s]; w.status == "" || w.next == "" {
			t.Errorf("stage %q has no words: %+v", s, w)
		}
	}
}

func TestReasonWords(t *testing.T) {
	for r, want := range map[Reason]string{
		ReasonLeaseExpired:     "the execution stopped without reporting (its lease ran out)",
		ReasonResumeLost:       "n8n no longer holds the parked execution",
		ReasonAwaitingApproval: "awaiting approval",
		"":                     "no reason given",
	} {
		if got := ReasonWords(r); got != want {
			t.Errorf("ReasonWords(%q) = %q, want %q", r, got, want)
		}
	}
	if w := WordsOf(&Record{State: StateCompleted}, WordsAt{}); w.Reason != "" {
		t.Errorf("a key without a reason reads reason %q", w.Reason)
	}
}

// Every reason a bulk decision leaves keys alone has words of its own,
// which the console's bulk page and the CLI's keys bulk both print.
func TestSkipWordsNameEveryReason(t *testing.T) {
	fallback := SkipWords("not a skip code")
	seen := map[string]string{}
	for _, why := range []string{SkipLiveLease, SkipAwaitingApproval, SkipCompleted, SkipParkedWaiting,
		SkipDecided, SkipChanged, SkipConflict, SkipNoRerunGate, SkipDamaged} {
		w := SkipWords(why)
		if why != SkipConflict && w == fallback {
			t.Errorf("%s has no words of its own: %q", why, w)
		}
		if other, ok := seen[w]; ok {
			t.Errorf("%s and %s read the same: %q", why, other, w)
		}
		seen[w] = why
	}
	if w := SkipWords(SkipParkedWaiting); !strings.Contains(w, "resume call") || !strings.Contains(w, "force") {
		t.Errorf("parked_waiting reads %q: say what the execution waits for and the way forward", w)
	}
}
