package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// A probe of a rolling outage is reported overdue once for its wait: it
// parks anew at each probe (each adding history), and a pass made while
// it is resumed does not list it; a later pass does not report it again.
func TestAProbeOfARollingOutageIsReportedOverdueOnce(t *testing.T) {
	cooldown := time.Minute
	pol := keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{"crm": {Cooldown: cooldown, UnreachableThreshold: 1}},
		Namespaces:   map[string]keystore.NamespacePolicy{ns: {ParkedLimit: time.Hour}},
	}
	store, clock := openOn(t, pol)
	ctx := context.Background()
	const key, url = "evt_probe", "http://n8n.local/webhook-waiting/1"
	first, _ := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm"})
	if f, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: first.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: url}); err != nil || f.Outcome != keystore.OutcomeParked {
		t.Fatalf("park: %+v %v", f, err)
	}
	r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	pass := catchup.OverduePasses(r, "crm")
	clock.Advance(2 * time.Hour)
	pass(ctx, clock.Now())
	for probe := range 12 {
		clock.Advance(cooldown + time.Second)
		claimed, ok, err := store.ClaimResume(ctx, ns, key, 2*time.Minute)
		if err != nil || !ok {
			t.Fatalf("probe %d: claim %v %v", probe, ok, err)
		}
		if _, err := store.ResumeAnswered(ctx, ns, key, *claimed.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		pass(ctx, clock.Now()) // the probe is woken: not listed
		res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", ResumeURL: url})
		if err != nil || res.Outcome != keystore.OutcomeAccepted {
			t.Fatalf("probe %d: woken reserve %+v %v", probe, res, err)
		}
		if f, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token,
			Reason: keystore.ReasonDestinationUnreachable, ResumeURL: url}); err != nil || f.Outcome != keystore.OutcomeParked {
			t.Fatalf("probe %d: parks again %+v %v", probe, f, err)
		}
		clock.Advance(time.Minute)
		pass(ctx, clock.Now())
	}
	evs, err := store.Events(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	reported := 0
	for _, ev := range evs {
		if ev.Kind == keystore.EventParkedOverdue {
			reported++
		}
	}
	if reported != 1 {
		t.Fatalf("the probe was reported overdue %d times in one wait", reported)
	}
}
