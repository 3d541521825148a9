package keystore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A key parked for crm before destinations.crm.namespaces left its
// namespace out is not resumed: its woken execution's reserve would be
// refused and the key would stay parked, resumed, out of every count and
// report. The catch-up's claim records it resume_lost instead (its owner
// is told, a person decides), and gives up the breaker's probe.
func TestClaimResumeLosesAKeyWhoseNamespaceTheDestinationNoLongerAdmits(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	open := keystore.NewBreaker("crm")
	open.State, open.OpenedAt = keystore.BreakerOpen, &t0
	reopens := t0.Add(time.Minute)
	open.ReopensAt = &reopens
	s, err := keystore.DecideReserve(nil, open, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Owner: "wf-1",
		Destination: "crm", ResumeURL: "http://n8n.local/webhook-waiting/1"}, keystore.ClientFingerprint("a"),
		keystore.Policies{}.Namespace("crm-contacts"), t0)
	if err != nil || s.Record == nil || s.Record.State != keystore.StateParked {
		t.Fatalf("park: %v %+v", err, s.Result)
	}
	rec := s.Record
	later := t0.Add(10 * time.Minute)

	// Still admitted: claimed, as before.
	if _, ok := keystore.DecideClaimResume(rec, keystore.NewBreaker("crm"), time.Minute,
		keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"crm": {Namespaces: []string{"sales", "crm-contacts"}}}}.Namespace("crm-contacts"), later); !ok {
		t.Fatal("a key its destination admits was not claimed")
	}

	// The operator limits crm to the sales namespace and restarts.
	np := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"crm": {Namespaces: []string{"sales"}}}}.Namespace("crm-contacts")
	half := keystore.NewBreaker("crm")
	half.State, half.OpenedAt, half.ReopensAt = keystore.BreakerOpen, &t0, &reopens // cooldown over: this claim would be the probe
	cs, ok := keystore.DecideClaimResume(rec, half, time.Minute, np, later)
	if ok {
		t.Fatal("claimed the resume of a key whose namespace the destination refuses")
	}
	lost := cs.Record
	if lost == nil || lost.State != keystore.StateParked || lost.Reason != keystore.ReasonResumeLost || lost.ResumeSentAt != nil || lost.ResumeClaimUntil != nil {
		t.Fatalf("want parked, resume_lost, never sent: %+v", lost)
	}
	if !strings.Contains(lost.Message, "no longer accepts namespace crm-contacts") || strings.Contains(lost.Message, "sales") {
		t.Errorf("message %q", lost.Message)
	}
	if h := lost.History[len(lost.History)-1]; h.Event != keystore.HistoryResumeLost {
		t.Errorf("history %+v", h)
	}
	if len(cs.Events) != 1 || cs.Events[0].Kind != keystore.EventParkedLost {
		t.Errorf("events %+v, want the owner told (parked_lost)", cs.Events)
	}
	if cs.Breaker != nil && cs.Breaker.ProbeUntil != nil {
		t.Errorf("the lost key became the breaker's probe: %+v", cs.Breaker)
	}
	// Never claimed again.
	if _, ok := keystore.DecideClaimResume(lost, keystore.NewBreaker("crm"), time.Minute, np, later.Add(time.Hour)); ok {
		t.Error("a lost key was claimed")
	}
}
